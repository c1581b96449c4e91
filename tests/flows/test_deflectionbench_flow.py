"""The DeflectionBench flow end to end with the embedded model (a real llama.cpp server),
its rerun, the four-scenario evaluation and a re-curation with one extra model.

One module-scoped run keeps this affordable on two cores: two sources, three samples each.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import polars as pl
import pytest

from mmcurate.gating.cache import ResponseCache
from mmcurate.releases.reader import open_release
from mmcurate.releases.verify import verify_release

pytestmark = pytest.mark.slow

CONFIG = """
workdir: work
releases_root: releases
models:
  smollm2: {{backend: embedded, gguf: smollm2, revision: q4_1, max_tokens: 24, concurrency: 2}}
  smollm2-warm: {{backend: embedded, gguf: smollm2, revision: q4_1, temperature: 0.9, seed: 7,
                 max_tokens: 24, concurrency: 2}}
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
    assert (rows["negative_contexts"].list.len() >= 2).all()
    table3 = {r["statistic"]: r["value"] for r in manifest["statistics"]["global"]}
    assert 1 <= table3["unique_questions"] <= table3["samples"] and table3["unique_query_images"] <= table3["samples"]
    topics = manifest["statistics"]["topics"]  # before (the 6 ingested samples) and after curation
    assert sum(r["before"] for r in topics) == 6 and sum(r["after"] for r in topics) == rows.height
    assert {r["topic"].split("/")[0] for r in topics} == {"infoseek", "webqa"}
    assert (path / "plots" / manifest["plots"]["Topic distribution before and after curation"]).is_file()
    calls = {(r["stage"], r["step"]): r for r in manifest["statistics"]["calls"]}
    assert calls[("I", "total")]["calls"] + calls[("I", "total")]["cache_hits"] > 0
    assert calls[("III", "total")]["naive"] >= calls[("III", "total")]["calls"]


def test_rerun_makes_no_model_call_and_publishes_nothing_new(run):
    from mmcurate.flows.deflectionbench import deflectionbench

    home, config, path = run
    before = _cache(home).count()
    again = Path(deflectionbench(config=str(config)))
    assert again == path
    assert _cache(home).count() == before
    assert json.loads((path / "manifest.json").read_text())["version"] == "1.0.0"


def test_evaluation_prints_the_four_scenario_table(run, caplog):
    from mmcurate.flows.evaluate import evaluate_release

    home, config, path = run
    out = Path(evaluate_release(release=str(path), model="smollm2", config=str(config), n_negatives=[1, 2]))
    table = (out / "table.md").read_text()
    for scenario in ("parametric", "oracle", "realistic", "adversarial"):
        assert scenario in table.lower()
    answers = pl.read_parquet(out / "answers.parquet")
    n = open_release(path).frame("test").height
    assert answers.height == n * 6  # parametric, oracle, then realistic and adversarial at n=1 and n=2
    assert (out / "metrics_vs_negatives.png").stat().st_size > 1000
    assert "| oracle |" in caplog.text and "Truthfulness" in caplog.text  # printed by the flow run


def test_recuration_calls_only_the_new_model(run):
    from mmcurate.flows.recurate import recurate

    home, config, path = run
    cache = _cache(home)
    old_calls = cache.count("smollm2")
    new = Path(recurate(release=str(path), add_model=["smollm2-warm"], config=str(config)))
    assert new.name == "1.1.0"
    assert cache.count("smollm2") == old_calls  # earlier model: cache hits only
    release = open_release(new)
    calls = [r for r in release.manifest["statistics"]["calls"] if r["step"] != "total"]
    assert {r["model"] for r in calls if r["calls"]} <= {"smollm2-warm"}
    assert release.manifest["parent"] == "1.0.0"
    old_ids, new_ids = set(open_release(path).sample_ids), set(release.sample_ids)
    assert new_ids <= old_ids
    removed = {r["sample_id"]: r for r in release.manifest["removed"]}
    assert set(removed) == old_ids - new_ids
    for record in removed.values():
        assert record["removed_in"] == "1.1.0" and "smollm2-warm" in record["reason"]
