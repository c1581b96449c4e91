"""Where a plan's sample count comes from, and ``mmcurate plan`` on the paper's config."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmcurate.core.config import load_config
from mmcurate.core.images import ImageStore
from mmcurate.planning.inputs import plan_input
from mmcurate.sources import adapter_class
from mmcurate.sources.ingest import ingest, ingest_folder
from tests.releases.cli_helpers import run_cli

REPO = Path(__file__).resolve().parents[2]
PAPER = REPO / "configs" / "deflectionbench-paper.yaml"


@pytest.mark.parametrize(
    "source, raw",
    [
        ("infoseek", 22),
        ("evqa", 21),
        ("viquae", 18),
        ("webqa", 15),
        ("mmdocrag", 14),
        ("mragbench", 14),
        ("reddit", None),
    ],
)
def test_raw_record_counts_of_the_fixtures(tmp_path, fixtures_root, source, raw):
    adapter = adapter_class(source)(fixtures_root / source, ImageStore(tmp_path))
    assert adapter.count_records() == raw  # an upper bound on what an ingest yields; None: no cheap count


def _config(tmp_path: Path, fixtures_root: Path, limit: int | None = None) -> Path:
    text = f"""
workdir: {tmp_path / "work"}
models: {{m: {{backend: scripted, script: {tmp_path / "rules.jsonl"}, default: x}}}}
deflectionbench:
  sources:
    - {{name: webqa, root: {fixtures_root / "webqa"}{"" if limit is None else f", limit: {limit}"}}}
    - {{name: viquae, root: {fixtures_root / "viquae"}}}
  gating: {{pool: [m]}}
"""
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_counts_come_from_ingests_else_raw_records_else_samples(tmp_path, fixtures_root):
    settings = load_config(_config(tmp_path, fixtures_root, limit=5))
    sources = settings.deflectionbench.sources
    raw = plan_input(settings, sources, None)
    assert raw.samples == 5 + 18 and not raw.rows  # webqa's raw count capped by its limit
    done = ingest(
        "webqa",
        sources[0].root,
        ingest_folder(settings.workdir, "webqa", sources[0].root),
        store=ImageStore(settings.workdir / "images"),
    )
    mixed = plan_input(settings, sources, None)
    assert mixed.samples == min(done.samples, 5) + 18 and len(mixed.rows) == 5
    assert "webqa 5 (ingest)" in mixed.how and "viquae 18 (raw records)" in mixed.how
    given = plan_input(settings, sources, 1000)
    assert given.samples == 1000 and len(given.rows) == 5  # the ingested rows still size the requests


def test_plan_of_the_paper_config(capsys, monkeypatch):
    code, out, _ = run_cli(capsys, monkeypatch, "plan", str(PAPER), "--samples", "45900")
    assert code == 0
    assert "45,900 candidates" in out and "2,775 released" in out
    for model in ("gemma3-27b", "qwen2.5-vl-32b", "internvl3-38b", "vl-rethinker-72b", "gpt-4o"):
        assert model in out
    assert "total" in out and "gpt-4o: hosted API" in out


def test_plan_errors_are_one_line(capsys, monkeypatch, tmp_path):
    code, _, err = run_cli(capsys, monkeypatch, "plan", str(PAPER))  # /data/... does not exist here
    assert code == 2 and "pass --samples N" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(capsys, monkeypatch, "plan", str(PAPER), "--samples", "10", "--retention", str(tmp_path))
    assert code == 2 and "not a release" in err and len(err.strip().splitlines()) == 1


def test_the_demo_config_in_an_empty_workdir_plans_every_benchmark(capsys, monkeypatch, tmp_path):
    """Issue 31 item 9: Reddit has no cheap record count; the plan stopped there and never planned
    ReflectV, POPE and CRAG-MM. The source is named unknown and every benchmark is planned."""
    monkeypatch.setenv("MMCURATE_WORKDIR", str(tmp_path / "empty"))
    code, out, err = run_cli(capsys, monkeypatch, "plan", str(REPO / "configs" / "demo.yaml"))
    assert code == 0 and err == ""
    plans = [line.split(",")[0] for line in out.splitlines() if line.startswith("plan: ")]
    assert plans == ["plan: deflectionbench", "plan: reflvqa", "plan: reflectv"]
    assert "plan: reflvqa, samples unknown (reddit unknown (no cheap record count and no ingest in the workdir" in out
    assert "requests, tokens, GPU-hours and cost: unknown until reddit is counted" in out
    assert "cragmm: mmcurate has no cost model of its curation yet" in out and "pope: mmcurate has no cost" in out


def test_an_uncounted_source_beside_counted_ones_makes_a_lower_bound(tmp_path, fixtures_root):
    from mmcurate.planning.bill import reflectv_bill

    settings = load_config(_config(tmp_path, fixtures_root))
    given = plan_input(
        settings,
        [
            *settings.deflectionbench.sources,
            settings.deflectionbench.sources[0].model_copy(update={"name": "reddit", "root": fixtures_root / "reddit"}),
        ],
        None,
    )
    assert given.samples == 15 + 18 and given.uncounted == ["reddit"] and "reddit unknown" in given.how
    demo = load_config(REPO / "configs" / "demo.yaml")
    demo.workdir = tmp_path / "empty"
    demo.reflectv.sources = [
        demo.reflectv.sources[0],
        demo.reflectv.sources[0].model_copy(update={"name": "reddit", "root": fixtures_root / "reddit"}),
    ]
    text = reflectv_bill(demo).render()
    assert "a lower bound: the samples of reddit are not counted" in text and "total" in text
