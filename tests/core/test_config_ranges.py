"""Every numeric setting is range-checked at load, one line naming the field (issue 22, item 2)."""

from __future__ import annotations

import textwrap

import pytest

from mmcurate.core.config import load_config
from mmcurate.core.errors import ConfigError
from mmcurate.sources import check_source

BASE = """
workdir: work
models:
  a: {backend: scripted, script: rules.jsonl, default: "no idea"}
deflectionbench:
  sources: [{name: webqa, root: data/webqa}]
  gating: {pool: [a]}
"""


def load_text(tmp_path, text: str):
    """The settings of config ``text`` (dedented), written to ``tmp_path/cfg.yaml``."""
    path = tmp_path / "cfg.yaml"
    path.write_text(textwrap.dedent(text))
    return load_config(path)


def _refused(tmp_path, text: str, *needles: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_text(tmp_path, text)
    message = str(err.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, (needle, message)


@pytest.mark.parametrize(
    "model_field, path",
    [
        ("concurrency: 0", "models.a.concurrency"),
        ("temperature: -1", "models.a.temperature"),
        ("temperature: 2.5", "models.a.temperature"),
        ("top_p: 0", "models.a.top_p"),
        ("top_p: 1.5", "models.a.top_p"),
        ("timeout: 0", "models.a.timeout"),
        ("max_tokens: 0", "models.a.max_tokens"),
        ("max_retries: -1", "models.a.max_retries"),
        ("seed: -1", "models.a.seed"),
        ("repetition_penalty: 0", "models.a.repetition_penalty"),
        ("n_ctx: 0", "models.a.n_ctx"),
    ],
)
def test_model_numbers(tmp_path, model_field: str, path: str) -> None:
    _refused(tmp_path, BASE.replace('default: "no idea"', f'default: "no idea", {model_field}'), path)


@pytest.mark.parametrize(
    "extra, path",
    [
        ("  k_min: -3\n", "deflectionbench.k_min"),
        ("  k_min: 0\n", "deflectionbench.k_min"),
        ("  seed: -1\n", "deflectionbench.seed"),
        ("  retrieval: {max_text_negatives: -1}\n", "deflectionbench.retrieval.max_text_negatives"),
        ("  retrieval: {chunk_size: 0}\n", "deflectionbench.retrieval.chunk_size"),
        ("  retrieval: {chunk_size: 100, chunk_overlap: 100}\n", "chunk_overlap (100) must be smaller than chunk_size"),
        ("  retrieval: {top_images: 4}\n", "top_images moved to the benchmark's mining.<source>.top_k"),
        ("  mining: {mragbench: {strategy: image_to_image, top_k: 0}}\n", "deflectionbench.mining.mragbench.top_k"),
        ("  mining: {mragbench: {strategy: image_to_image, top_k: 1001}}\n", "deflectionbench.mining.mragbench.top_k"),
        ("  mining: {mragbench: {strategy: text_to_text}}\n", "deflectionbench.mining.mragbench.strategy"),
        ("  topics: {n_neighbors: 1}\n", "deflectionbench.topics.n_neighbors"),
        ("  topics: {min_cluster_size: 1}\n", "deflectionbench.topics.min_cluster_size"),
        ("  topics: {reading: lda}\n", "deflectionbench.topics.reading"),
        ("  retrieval: {kb_limit: 0}\n", "deflectionbench.retrieval.kb_limit"),
        ("  source_mix: {webqa: [0.5, 0.2]}\n", "min <= max"),
        ("  source_mix: {webqa: [0.1, 1.5]}\n", "deflectionbench.source_mix.webqa[1]"),
    ],
)
def test_deflectionbench_numbers(tmp_path, extra: str, path: str) -> None:
    _refused(tmp_path, BASE + extra, path)


def test_mining_entries_keep_the_papers_for_the_sources_they_leave_out(tmp_path) -> None:
    """A source another benchmark reads (reddit) is refused by the curation's source check, which
    names the sources DeflectionBench reads (tests/benchmarks/test_registry.py), not here."""
    from mmcurate.benchmarks.deflectionbench import PAPER_MINING

    settings = load_text(tmp_path, BASE + "  mining: {webqa: {strategy: image_to_text, top_k: 3}}\n")
    assert settings.deflectionbench.mining["webqa"].model_dump() == {
        "strategy": "image_to_text",
        "top_k": 3,
        "kb": None,
    }  # the shared retrieval.kb
    assert settings.deflectionbench.mining["evqa"] == PAPER_MINING["evqa"]


def test_source_limit_runner_and_lists(tmp_path) -> None:
    _refused(
        tmp_path, BASE.replace("root: data/webqa}", "root: data/webqa, limit: -5}"), "deflectionbench.sources[0].limit"
    )
    _refused(tmp_path, BASE + "task_runner: {shard_size: 0}\n", "task_runner.shard_size")
    _refused(tmp_path, BASE + "task_runner: {workers: -2}\n", "task_runner.workers")
    _refused(
        tmp_path,
        BASE.replace("sources: [{name: webqa, root: data/webqa}]", "sources: []"),
        "deflectionbench.sources",
        "at least 1 item",
    )
    _refused(tmp_path, BASE.replace("pool: [a]", "pool: []"), "deflectionbench.gating.pool")


def test_reflvqa_and_reflectv_numbers(tmp_path) -> None:
    reflvqa = BASE + "reflvqa:\n  source: {name: reddit, root: data/reddit}\n"
    for field, path in [
        ("top_text: 0", "reflvqa.top_text"),
        ("distractor_images: -1", "reflvqa.distractor_images"),
        ("relevance_top_k: 0", "reflvqa.relevance_top_k"),
        ("max_right_inspectors: -1", "reflvqa.max_right_inspectors"),
        ("text_corpus_limit: 0", "reflvqa.text_corpus_limit"),
    ]:
        _refused(tmp_path, reflvqa + f"  {field}\n", path)
    reflectv = BASE + ("reflectv:\n  sources: []\n  rewriter: a\n  grounding: saliency\n  verifier: a\n")
    _refused(tmp_path, reflectv, "reflectv.sources", "at least 1 item")


def test_a_config_that_is_not_a_mapping_or_nested_too_deeply(tmp_path) -> None:
    _refused(tmp_path, "- a\n- b\n", "expected a mapping of settings at the top level, got a list")
    _refused(tmp_path, "workdir: w\nextra: " + "{a: " * 1200 + "1" + "}" * 1200 + "\n", "is nested too deeply to read")


def test_adapter_options_are_checked_with_their_path() -> None:
    with pytest.raises(ConfigError, match=r"^reflvqa.source.options.max_line_bytes: Input should be greater"):
        check_source("reddit", {"max_line_bytes": 0}, "reflvqa.source")
    with pytest.raises(ConfigError, match=r"^deflectionbench.sources\[1\].name: unknown source 'webqaa'"):
        check_source("webqaa", {}, "deflectionbench.sources[1]")
    check_source("infoseek", {"passage_words": 100}, "x")  # valid options pass


def test_every_benchmarks_empty_source_list_is_refused_at_load(tmp_path) -> None:
    """Issue 31 item 18: ``cragmm.sources: []`` was accepted, then every sample was "removed (see
    the ledger)" with no ledger. Every benchmark section with a source list has one rule
    (``core.config.Sources``), refused at load with the field's path."""
    from pydantic import ValidationError

    from mmcurate.benchmarks import curated
    from mmcurate.core.config import BenchmarkSection, Settings

    def section(name: str) -> type[BenchmarkSection]:
        annotation = Settings.model_fields[name].annotation
        [kind] = [k for k in getattr(annotation, "__args__", (annotation,)) if k is not type(None)]
        return kind

    with_lists = {b.name: section(b.name) for b in curated() if "sources" in section(b.name).model_fields}
    assert set(with_lists) >= {"deflectionbench", "reflectv", "cragmm", "pope"}
    for name, kind in with_lists.items():
        with pytest.raises(ValidationError) as err:
            kind.model_validate({"sources": []})
        assert ("sources",) in [e["loc"] for e in err.value.errors() if e["type"] == "too_short"], name
    _refused(tmp_path, BASE + "cragmm:\n  sources: []\n", "cragmm.sources", "at least 1 item", "(1 error)")
