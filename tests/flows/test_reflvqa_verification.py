"""The RefLVQA flow with the MAD cutoff and Kestrel sentence verification, on scripted models,
and ``mmcurate why`` showing the claim trace."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from mmcurate.releases.reader import open_release
from mmcurate.releases.verify import verify_release
from tests.flows import flowkit

pytestmark = pytest.mark.slow


def record(status, confidence, citations):
    return json.dumps(
        {
            "verdict": status,
            "checked": [
                {
                    "claim_id": "c1",
                    "status": status,
                    "confidence": confidence,
                    "why": f"{status} (scripted)",
                    "citations": citations,
                }
            ],
        }
    )


# sentences starting "She " (the fixture's astronaut answer) are contradicted; the rest are supported twice
VERIFIER = [
    {"when_all": ["Statement: She "], "answer": record("contradicted", 0.95, ["e1"])},
    {"when_all": ["Statement: ", "Previous verdict"], "answer": record("supported", 0.95, ["e1"])},
]


@pytest.fixture(scope="module")
def run(tmp_path_factory, fixtures_root, prefect_harness):
    from mmcurate.flows.reflvqa.curate import reflvqa

    home = tmp_path_factory.mktemp("reflvqa-verify")
    (home / "inspector.jsonl").write_text("")
    (home / "verifier.jsonl").write_text("".join(json.dumps(r) + "\n" for r in VERIFIER))
    config = flowkit.reflvqa_config(
        home,
        fixtures_root,
        {
            "inspector": {"backend": "scripted", "script": "inspector.jsonl", "default": "no idea"},
            "verifier": {
                "backend": "scripted",
                "script": "verifier.jsonl",
                "default": record("supported", 0.95, ["e1"]),
            },
        },
        limit=4,
        reflvqa={
            "top_text": 10,
            "cutoff": {"kind": "mad", "tau": 0.1, "lambda": 1.5, "max_keep": 3},
            "verification": {"verifier": "verifier", "claims": "heuristic", "gate": {"thresholds": {"count": 0.88}}},
        },
    )
    return home, Path(reflvqa(config=str(config)))


def test_release_cites_through_the_cutoff_and_records_verification(run):
    _, path = run
    assert verify_release(path).ok
    release = open_release(path)
    ledger = pl.from_arrow(release.ledger)
    cutoffs = ledger.filter(pl.col("check") == "citation.cutoff")
    assert cutoffs.height > 0
    for row in cutoffs.iter_rows(named=True):
        detail = json.loads(row["detail"])
        assert detail["cutoff"] == "mad" and detail["retrieved"] == 10 and 0 < detail["kept"] <= 3
        assert detail["kept"] + detail["cut"] == 10 and detail["theta"] >= 0.1
    judged = ledger.filter(pl.col("check") == "citation.text")
    assert judged.height == sum(json.loads(d)["kept"] for d in cutoffs["detail"])  # only kept documents are judged
    components = release.manifest.components
    assert components["text_cutoff"] == "mad" and components["claim_extractor"] == "heuristic-claims-v1"
    notes = " ".join(release.manifest.notes)
    assert "cut with mad" in notes and "heuristic stand-in" in notes and "Sentence verification" in notes
    roles = {m.role for m in release.manifest.models}
    assert "claim_verifier" in roles
    sentences = ledger.filter(pl.col("check") == "verify.sentence")
    claims = ledger.filter(pl.col("check") == "verify.claim")
    assert sentences.height > 0 and claims.height >= sentences.height
    verdicts = set(sentences["verdict"].to_list())
    assert {"supported", "contradicted"} <= verdicts <= {"supported", "contradicted", "insufficient"}
    qa = release.frame("qa")
    for row in sentences.iter_rows(named=True):
        detail = json.loads(row["detail"])
        if row["verdict"] == "contradicted":
            assert detail["text"].startswith("She ")
            # every round contradicts (the rounds go on to the limit); only the refuting e1 goes
            assert detail["rounds"] == 3 and detail["stopped"] == "max_rounds"
            refuted = detail["evidence"]["e1"]
            kept = [doc for doc in detail["before"]["text_citations"] if doc != refuted]
            assert detail["after"] == {"text_citations": kept, "flagged": True}
        if row["verdict"] == "supported":
            assert detail["rounds"] == 2 and detail["stopped"] == "stable" and not detail["after"]["flagged"]
    # the release's sentences are the verified ones
    by_id = {
        (r["sample_id"], json.loads(r["detail"])["sentence"]): json.loads(r["detail"])["after"]
        for r in sentences.iter_rows(named=True)
    }
    for row in qa.iter_rows(named=True):
        for s in row["sentences"]:
            if (row["sample_id"], s["index"]) in by_id:
                after = by_id[(row["sample_id"], s["index"])]
                assert (s["text_citations"], s["flagged"]) == (after["text_citations"], after["flagged"])
    funnel = [r["stage"] for r in release.manifest.statistics["funnel"]]
    assert funnel[-3:] == ["citation", "verification", "dedup"]


def test_why_shows_the_claim_trace(run, capsys, monkeypatch):
    from tests.releases.cli_helpers import run_cli

    _, path = run
    ledger = pl.from_arrow(open_release(path).ledger)
    claims = ledger.filter((pl.col("check") == "verify.claim") & pl.col("detail").str.contains('"text": "She '))
    sample = claims["sample_id"][0]
    code, out, _ = run_cli(capsys, monkeypatch, "why", str(path), sample)
    assert code == 0
    assert "verification/verify.claim model=verifier context=s" in out
    assert "existence claim c1" in out or "count claim c1" in out
    assert "confidence 0.95 >= " in out and "(confident); cites e1 (" in out
    assert "stopped: " in out and "citation/citation.cutoff" in out and "mad kept " in out
    assert 'claim c1 "She ' in out and "contradicted" in out and "gate" in out
