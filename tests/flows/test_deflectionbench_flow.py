"""The one embedded smoke test of the DeflectionBench flow: the embedded model (SmolLM2-135M
behind a real llama.cpp server) end to end, and its rerun.

What SmolLM2 answers is its own business, so only invariants are checked: every sample has
its verdicts, what is released passed all three stages with enough negatives, the calls
table adds up, the release is not empty, and a rerun makes no model call. Every other flow
test runs on deterministic models (tests/flows/flowkit.py). One module-scoped run keeps this
affordable on two cores: two sources, three samples each.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import polars as pl
import pytest

from mmcurate.models.cache import ResponseCache
from mmcurate.releases.reader import open_release
from mmcurate.releases.verify import verify_release

pytestmark = pytest.mark.slow

CONFIG = """
workdir: work
releases_root: releases
models:
  smollm2: {{backend: embedded, gguf: smollm2, revision: q4_1, max_tokens: 24, concurrency: 2}}
judge: {{kind: lexical}}
deflectionbench:
  sources:
    - {{name: infoseek, root: {fx}/infoseek, limit: 3}}
    - {{name: webqa, root: {fx}/webqa, limit: 3}}
  gating: {{pool: [smollm2]}}
  retrieval: {{kb: {fx}/kb/kb.jsonl, top_pages: 3, top_images: 2, max_text_negatives: 3}}
  k_min: 2
  seed: 5
  version: 1.0.0
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory, fixtures_root, prefect_harness):
    from mmcurate.flows.deflectionbench import deflectionbench

    home = tmp_path_factory.mktemp("deflection")
    config = home / "config.yaml"
    config.write_text(textwrap.dedent(CONFIG.format(fx=fixtures_root)))
    release = Path(deflectionbench(config=str(config)))
    return home, config, release


def _cache(home: Path) -> ResponseCache:
    return ResponseCache.open(f"sqlite:///{home / 'work' / 'responses.sqlite'}")


def test_flow_writes_a_valid_explained_release(run):
    home, _, path = run
    assert path == home / "releases" / "deflectionbench" / "1.0.0"
    assert verify_release(path).ok
    release = open_release(path)
    manifest = release.manifest
    assert manifest["judge"]["name"] == "lexical-v1"
    assert {m["name"] for m in manifest["models"]} == {"smollm2"}
    # every ingested sample got a Stage I verdict; every released one passed all three stages
    ledger = pl.from_arrow(release.ledger)
    verdicts = ledger.filter(pl.col("check") == "gate.verdict")
    assert verdicts.height + ledger.filter(pl.col("check") == "gate.precondition").height == 6
    for sample_id in release.sample_ids:
        checks = set(ledger.filter(pl.col("sample_id") == sample_id)["check"].to_list())
        assert {"gate.verdict", "oracle.gold", "oracle.verdict"} <= checks
    rows = release.frame("test")
    assert rows.height > 0 and (rows["negative_contexts"].list.len() >= 2).all()
    table3 = {r["statistic"]: r["value"] for r in manifest["statistics"]["global"]}
    assert 1 <= table3["unique_questions"] <= table3["samples"] and table3["unique_query_images"] <= table3["samples"]
    topics = manifest["statistics"]["topics"]  # before (the 6 ingested samples) and after curation
    assert sum(r["before"] for r in topics) == 6 and sum(r["after"] for r in topics) == rows.height
    assert {r["topic"].split("/")[0] for r in topics} == {"infoseek", "webqa"}
    assert (path / "plots" / manifest["plots"]["Topic distribution before and after curation"]).is_file()
    calls = {(r["stage"], r["step"]): r for r in manifest["statistics"]["calls"]}
    assert calls[("I", "total")]["calls"] + calls[("I", "total")]["cache_hits"] > 0
    for stage in ("I", "III"):
        total = calls[(stage, "total")]
        assert total["naive"] >= total["calls"] + total["cache_hits"] > 0


def test_rerun_makes_no_model_call_and_publishes_nothing_new(run):
    from mmcurate.flows.deflectionbench import deflectionbench

    home, config, path = run
    before = _cache(home).count()
    again = Path(deflectionbench(config=str(config)))
    assert again == path
    assert _cache(home).count() == before
    assert json.loads((path / "manifest.json").read_text())["version"] == "1.0.0"
