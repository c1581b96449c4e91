"""The one embedded smoke test of the DeflectionBench flow: the embedded model (SmolLM2-135M
behind a real llama.cpp server) end to end, and its rerun.

What SmolLM2 answers is its own business, so nothing checked here depends on it. SmolLM2
gates beside the dry run's scripted reader (tests/flows/flowkit.py) over the sources the
scripted flow tests use: SmolLM2 is asked first, on every sample, and its grades are
recorded and read by the rules like any model's. Stage I reads ``none_correct``: only a
CORRECT answer without evidence drops a sample, so SmolLM2 declining or erring keeps it;
Stage III's gold check keeps every sample the reader answers from its gold evidence, and the
reader answers no distractor. So the release holds the scripted release's samples less any
that SmolLM2 answered without their evidence (plus any it kept by answering from the gold).
It replies in at most two tokens, too few for the lexical judge to find "about 108 million
years" in: the Tycho sample is released whatever SmolLM2 says. Each check is an invariant:
every sample has its verdicts, what is released passed all three stages with enough
negatives and matches the ledger, the calls table adds up, and a rerun makes no model call.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from mmcurate.models.cache import ResponseCache
from mmcurate.releases.reader import open_release
from mmcurate.releases.verify import verify_release
from tests.flows import flowkit

pytestmark = pytest.mark.slow

SMOLLM2 = {"backend": "embedded", "gguf": "smollm2", "revision": "q4_1", "max_tokens": 2, "concurrency": 2}
TYCHO = "How old is the crater Tycho?"  # gold "about 108 million years": more than two tokens hold
K_MIN = 3


@pytest.fixture(scope="module")
def scripted(tmp_path_factory, fixtures_root, prefect_harness) -> Path:
    """The same sources gated by the scripted reader alone (shared with the other flow tests)."""
    return flowkit.baseline(tmp_path_factory, fixtures_root)[1]


@pytest.fixture(scope="module")
def run(tmp_path_factory, fixtures_root, prefect_harness):
    from mmcurate.flows.deflectionbench.curate import deflectionbench

    home = tmp_path_factory.mktemp("deflection")
    config = flowkit.scripted_config(home, fixtures_root, models={"smollm2": SMOLLM2, "vlm-reader": flowkit.READER})
    data = yaml.safe_load(config.read_text())
    data["deflectionbench"]["gating"]["rule"] = "none_correct"
    data["deflectionbench"]["k_min"] = K_MIN
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    release = Path(deflectionbench(config=str(config)))
    return home, config, release


def _cache(home: Path) -> ResponseCache:
    return ResponseCache.open(f"sqlite:///{home / 'work' / 'responses.sqlite'}")


def test_flow_writes_a_valid_explained_release(run, scripted):
    home, _, path = run
    assert path == home / "releases" / "deflectionbench" / "1.0.0"
    assert verify_release(path).ok
    release = open_release(path)
    manifest = release.manifest
    assert manifest.judge_name == "lexical-v1"
    assert {m.name for m in manifest.models} == {"smollm2", "vlm-reader"}
    ledger = pl.from_arrow(release.ledger)
    ingested = sum(r["before"] for r in manifest.statistics["topics"])
    # every ingested sample got a Stage I verdict, and SmolLM2 was asked about each one that had a question
    verdicts = ledger.filter(pl.col("check") == "gate.verdict")
    assert verdicts.height + ledger.filter(pl.col("check") == "gate.precondition").height == ingested
    asked = ledger.filter((pl.col("check") == "gate.answer") & (pl.col("model") == "smollm2"))
    assert set(asked["sample_id"].to_list()) == set(verdicts["sample_id"].to_list())
    # the scripted release's samples stay, but for those SmolLM2 answered without their evidence
    # (a sample, or a distractor it then loses); more may join where SmolLM2 read the gold
    knew = ledger.filter(
        (pl.col("model") == "smollm2")
        & (pl.col("verdict") == "CORRECT")
        & pl.col("check").is_in(["gate.answer", "oracle.distractor"])
    )
    assert set(open_release(scripted).sample_ids) - set(knew["sample_id"].to_list()) <= set(release.sample_ids)
    kept = ledger.filter((pl.col("check") == "oracle.verdict") & (pl.col("verdict") == "keep"))
    assert sorted(kept["sample_id"].to_list()) == sorted(release.sample_ids)
    for sample_id in release.sample_ids:
        checks = set(ledger.filter(pl.col("sample_id") == sample_id)["check"].to_list())
        assert {"gate.verdict", "oracle.gold", "oracle.verdict"} <= checks
    rows = release.frame("test")
    assert TYCHO in rows["question"].to_list()
    assert rows.height == len(release.sample_ids) and (rows["negative_contexts"].list.len() >= K_MIN).all()
    table3 = {r["statistic"]: r["value"] for r in manifest.statistics["global"]}
    assert 1 <= table3["unique_questions"] <= table3["samples"] and table3["unique_query_images"] <= table3["samples"]
    topics = manifest.statistics["topics"]  # before and after curation, BERTopic's clusters (appendix C)
    assert sum(r["after"] for r in topics) == rows.height
    [reading] = [r for r in manifest.statistics["readings"] if r["setting"] == "topics"]
    assert reading["value"] == "bertopic" and "topics.reading bertopic" in (path / "README.md").read_text()
    by_ledger = ledger.filter(pl.col("stage") == "topics").group_by("verdict").len()
    assert dict(by_ledger.rows()) == {r["topic"]: r["before"] for r in topics if r["before"]}
    assert (path / "plots" / manifest.plots["Topic distribution before and after curation"]).is_file()
    calls = {(r["stage"], r["step"]): r for r in manifest.statistics["calls"]}
    for stage in ("I", "III"):
        total = calls[(stage, "total")]
        assert total["naive"] >= total["calls"] + total["cache_hits"] > 0


def test_rerun_makes_no_model_call_and_publishes_nothing_new(run):
    from mmcurate.flows.deflectionbench.curate import deflectionbench

    home, config, path = run
    before = _cache(home).count()
    again = Path(deflectionbench(config=str(config)))
    assert again == path
    assert _cache(home).count() == before
    assert json.loads((path / "manifest.json").read_text())["version"] == "1.0.0"
