"""A sixth benchmark added from a package of its own, editing no file of mmcurate.

The package is written into ``tmp_path`` at test time: its config section, one stage, a
release kind, a source adapter of its own format and its ``Benchmark``, registered through
``mmcurate.benchmarks.register`` (the benchmark), ``register_part`` (its release kind) and
``register_adapter`` (its source adapter). The test loads a config with its section (range checks with
the field path, environment overrides, paths resolved against the file), begins a curation
(which checks the toy's source against its adapter), ingests its raw file with the toy's
adapter (a bad record quarantined with its locator), runs its stage, writes and validates a
release of its kind and reads it back through the registry.
"""

from __future__ import annotations

import importlib
import json
import sys
import textwrap

import pyarrow.parquet as pq
import pytest

import mmcurate.benchmarks.parts as parts
import mmcurate.benchmarks.registry as registry
import mmcurate.core.config as config
from mmcurate.benchmarks import get, register, register_adapter
from mmcurate.core.config import load_config
from mmcurate.core.errors import ConfigError
from mmcurate.core.images import ImageStore
from mmcurate.core.schema import QUARANTINE
from mmcurate.core.stages import StageContext
from mmcurate.releases.curation import begin_curation
from mmcurate.releases.draft import ReleaseDraft
from mmcurate.releases.manifest import VALIDATION_FILE
from mmcurate.releases.reader import open_release
from mmcurate.releases.writer import write_release
from mmcurate.sources import adapter_class, adapter_paths
from mmcurate.sources.ingest import ingest

TOY = textwrap.dedent('''
    """A toy benchmark: questions at least ``min_chars`` long."""
    from __future__ import annotations

    from pathlib import Path

    import great_expectations.expectations as gxe
    import pyarrow as pa
    from pydantic import Field

    from mmcurate.benchmarks import Benchmark, register_adapter, register_part
    from mmcurate.core.config import BenchmarkSection, SourceSpec
    from mmcurate.core.ledger import Decision
    from mmcurate.core.records import Rejected, Sample
    from mmcurate.core.stages import Stage, StageResult
    from mmcurate.releases.kind import ReleaseKind
    from mmcurate.releases.kind import FrameCheck
    from mmcurate.sources.base import Located, SourceAdapter, jsonl_records, text_field


    @register_adapter("toy", "toy")
    class ToySource(SourceAdapter):
        """``questions.jsonl``: one ``{"id", "q", "a"}`` object per line."""

        name = "toy"

        def source_files(self):
            return [self.require("questions.jsonl")]

        def records(self):
            for line in jsonl_records(self.source_files()[0]):
                if isinstance(line, Rejected):
                    yield line
                    continue
                try:
                    sample = Sample(source="toy", source_id=text_field(line.record, "id", numbers=True),
                                    question=text_field(line.record, "q"), answers=[text_field(line.record, "a")])
                except ValueError as exc:
                    yield Rejected(line.locator, str(exc), line.raw)
                    continue
                yield Located(line.locator, sample, line.raw)


    class ToyConfig(BenchmarkSection):
        sources: list[SourceSpec] = Field(min_length=1)
        min_chars: int = Field(default=3, ge=1, le=100)
        glossary: Path | None = None
        version: str = "1.0.0"

        def roles(self, judge):
            return []


    class LongEnough(Stage):
        name = "toy.length"

        def __init__(self, min_chars: int) -> None:
            self.min_chars = min_chars

        def run(self, samples, ctx):
            keep = [len(q) >= self.min_chars for q in samples.column("question").to_pylist()]
            decisions = [Decision(sample_id=s, stage=self.name, check="toy.length_v1",
                                  verdict="keep" if k else "drop")
                         for s, k in zip(samples.column("sample_id").to_pylist(), keep)]
            return StageResult(stage=self.name, kept=samples.filter(pa.array(keep)), decisions=decisions,
                               run_id=ctx.run_id, counts={"in": samples.num_rows, "kept": sum(keep)})


    def checks(release):
        frame = release.table("questions").to_pandas()
        return [FrameCheck("questions", frame, "sample_id",
                           [gxe.ExpectColumnValuesToBeUnique(column="sample_id")])], []


    KIND = register_part("toy", "release")(ReleaseKind(
        benchmark="toy", pretty="Toy", description="Questions long enough.", configs=("questions",), checks=checks,
        distributions=lambda tables: {}))

    BENCHMARK = Benchmark(name="toy", title="a toy", paper="none", sources=("toy",), config=ToyConfig)
''')


@pytest.fixture
def toybench(tmp_path, monkeypatch):
    """The toy package on ``sys.path``, registered; the registries are restored afterwards."""
    (tmp_path / "pkg" / "toybench").mkdir(parents=True)
    (tmp_path / "pkg" / "toybench" / "__init__.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    monkeypatch.setattr(registry, "BENCHMARKS", dict(registry.BENCHMARKS))
    monkeypatch.setattr(config, "_SECTIONS", dict(config._SECTIONS))
    monkeypatch.setattr(parts, "_PARTS", dict(parts._PARTS))
    monkeypatch.setattr(parts, "_ADAPTERS", dict(parts._ADAPTERS))
    module = importlib.import_module("toybench")
    register(module.BENCHMARK)
    yield module
    sys.modules.pop("toybench", None)


def _config(tmp_path, min_chars: int) -> str:
    path = tmp_path / "toy.yaml"
    path.write_text(
        f"workdir: work\nreleases_root: releases\n"
        f"toy:\n  sources: [{{name: toy, root: raw}}]\n  min_chars: {min_chars}\n  glossary: words.txt\n"
    )
    return str(path)


def test_a_toy_benchmark_registers_loads_runs_and_releases(tmp_path, toybench, monkeypatch):
    assert get("toy").config is toybench.ToyConfig
    with pytest.raises(
        ConfigError,
        match=r"^config .*toy.yaml: toy.min_chars: Input should be less than or "
        r"equal to 100 \(1 error\)$",
    ):
        load_config(_config(tmp_path, 101))
    monkeypatch.setenv("MMCURATE_TOY__MIN_CHARS", "6")
    settings = load_config(_config(tmp_path, 4))
    section = get("toy").section_of(settings)
    assert isinstance(section, toybench.ToyConfig) and section.min_chars == 6  # the environment wins
    assert section.glossary == tmp_path / "words.txt"  # resolved against the config's folder
    assert settings.sources_of("toy")[0][0] == "toy.sources[0]" and settings.roles("toy") == []

    questions = ["Why?", "What colour is the sky?", "Who painted it?"]
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "questions.jsonl").write_text(
        "".join(json.dumps({"id": i, "q": q, "a": "blue"}) + "\n" for i, q in enumerate(questions))
        + json.dumps({"id": 9, "a": "no question"})
        + "\n"
    )
    curation = begin_curation(_config(tmp_path, 4), "toy")  # its source checked against its own adapter
    assert curation.benchmark is get("toy") and "toy" in adapter_paths()
    spec = settings.sources_of("toy")[0][1]
    ingested = ingest(spec.name, spec.root, tmp_path / "ingest")
    samples = pq.read_table(ingested.samples_path)
    assert samples.column("question").to_pylist() == questions
    quarantined = pq.read_table(tmp_path / "ingest" / "quarantine.parquet").to_pylist()
    assert [(r["locator"], r["reason"]) for r in quarantined] == [("questions.jsonl:4", "missing field q")]
    store = ImageStore(tmp_path / "images")
    result = toybench.LongEnough(section.min_chars).run(samples, StageContext(settings, "run-1", store))
    assert result.kept.column("question").to_pylist() == questions[1:]
    assert [d.verdict for d in result.decisions] == ["drop", "keep", "keep"]

    draft = ReleaseDraft(
        kind=get("toy").release_kind(),
        version=section.version,
        parent=None,
        tables={"questions": result.kept},
        ledger=result.ledger(),
        quarantine=QUARANTINE.empty_table(),
        config=settings.resolved(),
        models=[],
        judge={"name": "none"},
        components={},
        source_files=[],
        counts={"per_stage": {result.stage: result.counts}},
        statistics={},
        seed=0,
    )
    release = open_release(write_release(draft, settings.releases_root, store))
    assert release.benchmark == "toy" and release.table("questions").num_rows == 2
    assert json.loads((release.path / VALIDATION_FILE).read_text())["success"] is True
    assert release.manifest.config["toy"]["min_chars"] == 6


def test_an_adapter_name_is_taken_once(toybench):
    """A benchmark's own adapter may not take a name mmcurate's adapters or another benchmark use."""
    with pytest.raises(ConfigError, match="brings the source adapter 'toy', which benchmark 'toy' brought first"):
        register_adapter("toy2", "toy")(toybench.ToySource)
    register_adapter("toy3", "webqa")(toybench.ToySource)
    with pytest.raises(ConfigError, match="a name mmcurate's own adapters use"):
        adapter_class("webqa")


def test_a_section_name_is_taken_once(toybench):
    with pytest.raises(ConfigError, match="config section toy is taken"):
        config.register_sections({"toy": type("Other", (toybench.ToyConfig,), {})})
    with pytest.raises(ConfigError, match="config section workdir is taken"):
        config.register_sections({"workdir": toybench.ToyConfig})
