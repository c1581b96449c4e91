"""The dry-run release of DeflectionBench (configs/dryrun.yaml: two scripted models, the
bundled fixtures).

With ``oracle_rule: none_correct`` (the Stage III rule before eq. 4 became the default) it
has exactly the content recorded before the package layout changed (golden/dryrun-1.0.0.json,
written by the code of commit 5cf30db): the same rows in the data shards and the same ledger
verdicts. A change that alters curation must update the golden file on purpose and say why.
Since the near-duplicate check (annotation/dedup.py) the ledger holds its 6 flags as well
(1073 -> 1079 rows: one question asked twice about the same image, five shared images); the
data shards are unchanged. Issue 32 changed it on purpose (14 rows; 1079 -> 898 ledger rows):
Stage II mines per source as seed 003's appendix says (InfoSeek, ViQuAE and E-VQA text passages
only, MRAG-Bench 20 of its own images; before, every mined source got 10 images too), so the
released samples' negatives and the Stage III distractor checks changed; and every ingested
sample's BERTopic topic is a ledger row (80 rows, stage ``topics``).

The default rule (``all_incorrect``, eq. 4) changes exactly the samples it should: those that
no model answered CORRECT with the gold evidence but some model declined (NOT_ATTEMPTED).
The dry-run scripts never decline with evidence, so that test adds two declines.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from mmcurate.releases.reader import open_release
from tests.dryrun import dryrun_config
from tests.flows.release_fingerprint import content_fingerprint

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden" / "dryrun-1.0.0.json"
DECLINED = ("Question: What kind of cat is Chelsea?", "Question: How much does adult admission cost?")


def test_dryrun_release_content_is_unchanged(tmp_path, fixtures_root, prefect_harness):
    from mmcurate.flows.deflectionbench.curate import deflectionbench

    config = dryrun_config(tmp_path, fixtures_root, oracle_rule="none_correct", leakage_filter="answer_or_overlap")
    release = Path(deflectionbench(config=str(config)))
    assert content_fingerprint(release, portable=True) == json.loads(GOLDEN.read_text())
    statistics = json.loads((release / "manifest.json").read_text())["statistics"]
    assert {r["source"]: r["strategy"] for r in statistics["mining_per_source"]} == {
        "infoseek": "image_to_text",
        "viquae": "image_to_text",
        "evqa": "image_to_image_pages",
        "mragbench": "image_to_image",
        "webqa": "source",
        "mmdocrag": "source",
    }
    card = (release / "README.md").read_text()
    assert "topics.reading bertopic: BERTopic over 80 questions" in card and "### Mining per source" in card


def _verdicts(release: Path) -> pl.DataFrame:
    return pl.from_arrow(open_release(release).ledger).select("sample_id", "check", "model", "context_id", "verdict")


def test_default_rule_keeps_exactly_the_samples_a_model_declined(tmp_path, fixtures_root, prefect_harness):
    from mmcurate.flows.deflectionbench.curate import deflectionbench

    reader = tmp_path / "vlm-reader.jsonl"  # declines two questions when shown any evidence
    reader.write_text(
        "".join(json.dumps({"when_all": [q, "Evidence:"], "answer": "I don't know"}) + "\n" for q in DECLINED)
        + (REPO / "configs" / "dryrun" / "vlm-reader.jsonl").read_text()
    )
    runs = {}
    for rule in ("none_correct", None):  # None: the config says nothing, the default applies
        config = dryrun_config(
            tmp_path,
            fixtures_root,
            releases=f"releases-{rule or 'default'}",
            oracle_rule=rule,
            sources=("webqa", "mmdocrag"),
            reader_script=reader,
        )
        runs[rule or "all_incorrect"] = Path(deflectionbench(config=str(config)))
    strict, paper = (_verdicts(runs[r]) for r in ("none_correct", "all_incorrect"))
    assert open_release(runs["all_incorrect"]).manifest.config["deflectionbench"]["gating"]["oracle_rule"] == (
        "all_incorrect"
    )

    gold = strict.filter(pl.col("check") == "oracle.gold")
    declined_only = set(gold.filter(pl.col("verdict") == "NOT_ATTEMPTED")["sample_id"]) - set(
        gold.filter(pl.col("verdict") == "CORRECT")["sample_id"]
    )
    assert len(declined_only) == len(DECLINED)

    def final(frame: pl.DataFrame) -> dict[str, str]:
        rows = frame.filter(pl.col("check") == "oracle.verdict")
        return dict(zip(rows["sample_id"].to_list(), rows["verdict"].to_list()))

    before, after = final(strict), final(paper)
    assert before.keys() == after.keys()
    changed = {sid for sid in before if before[sid] != after[sid]}
    assert changed == declined_only and all(before[sid] == "drop" for sid in changed)
    # every other sample has the same decisions, row for row, under both rules
    rest = pl.col("sample_id").is_in(list(changed)).not_()
    key = ["sample_id", "check", "model", "context_id", "verdict"]
    assert strict.filter(rest).sort(key, nulls_last=True).equals(paper.filter(rest).sort(key, nulls_last=True))
    kept_before = set(open_release(runs["none_correct"]).sample_ids)
    kept_after = set(open_release(runs["all_incorrect"]).sample_ids)
    assert kept_after - kept_before == {sid for sid in changed if after[sid] == "keep"} != set()
    assert kept_before <= kept_after


def test_default_leakage_filter_leaves_leaking_distractors_to_eq5(tmp_path, fixtures_root, prefect_harness):
    """Seed 003, eq. 2: mining removes only the gold contexts (``leakage_filter: none``, the
    default); a mined passage holding the answer becomes a candidate distractor, and the
    distractor check of eq. 5 removes it when a gating model answers CORRECT with it alone.
    ``answer_or_overlap`` (the rules before) removes such passages before any model sees them.
    The pairing ledger records the filter and what each of its rules removed."""
    from mmcurate.benchmarks.deflectionbench import RetrievalConfig
    from mmcurate.core.text import find_answer
    from mmcurate.flows.deflectionbench.curate import deflectionbench
    from mmcurate.retrieval.chunking import chunk_text
    from mmcurate.retrieval.kb import load_kb

    runs = {}
    for leakage in ("answer_or_overlap", None):  # None: the config says nothing, the default applies
        config = dryrun_config(
            tmp_path,
            fixtures_root,
            releases=f"releases-{leakage or 'default'}",
            sources=("infoseek", "evqa", "viquae", "mragbench"),
            leakage_filter=leakage,
        )
        runs[leakage or "none"] = open_release(Path(deflectionbench(config=str(config))))

    def mining(release) -> list[dict]:  # the text miner's counts (MRAG-Bench mines images only: it has none)
        rows = pl.from_arrow(release.ledger).filter(pl.col("check") == "negatives.mined")
        return [detail["mining"] for detail in map(json.loads, rows["detail"].to_list()) if "mining" in detail]

    paper, strict = mining(runs["none"]), mining(runs["answer_or_overlap"])
    assert {m["leakage_filter"] for m in paper} == {"none"} and {m["leakage_filter"] for m in strict} == {
        "answer_or_overlap"
    }
    assert all(m["removed"]["answer"] == m["removed"]["overlap"] == 0 for m in paper)
    assert sum(m["removed"]["answer"] for m in strict) > 0
    assert sum(m["candidates"] for m in paper) == sum(m["candidates"] for m in strict)

    # eq. 5 removed mined passages that hold the answer the gating model gave with them alone
    ledger = pl.from_arrow(runs["none"].ledger).filter(pl.col("check") == "oracle.distractor")
    removed = ledger.filter(
        pl.col("model").is_null() & (pl.col("verdict") == "remove") & pl.col("context_id").str.starts_with("kb:")
    )
    answered = {
        (r["sample_id"], r["context_id"]): json.loads(r["detail"])["answer"]
        for r in ledger.filter(pl.col("verdict") == "CORRECT").to_dicts()
    }
    kb = load_kb(str(fixtures_root / "kb" / "kb.jsonl"))
    pages = dict(zip(kb["doc_id"].to_pylist(), kb["text"].to_pylist()))
    cfg = RetrievalConfig()

    def passage(context_id: str) -> str:
        doc, number = context_id.removeprefix("kb:").rsplit("#", 1)
        return chunk_text(pages[doc], cfg.chunk_unit, cfg.chunk_size, cfg.chunk_overlap)[int(number)]

    leaks = [(r["sample_id"], r["context_id"]) for r in removed.to_dicts()]
    assert leaks and all(find_answer(passage(cid), [answered[(sid, cid)]]) >= 0 for sid, cid in leaks)
    readings = {r["setting"]: r["value"] for r in runs["none"].manifest.statistics["readings"]}
    assert readings["retrieval.leakage_filter"] == "none" and readings["gating.force_guess"] == "false"
