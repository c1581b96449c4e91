"""Kestrel sentence verification after the citations, with a scripted verifier."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from mmcurate.annotation.reflvqa.citations import RETRIEVED
from mmcurate.annotation.reflvqa.verification import CHECK_CLAIM, CHECK_SENTENCE, VerifySentences
from mmcurate.benchmarks.reflvqa import SentenceVerification
from mmcurate.core.errors import MmcurateError
from mmcurate.core.schema import SENTENCE

DOCS = [
    {"doc_id": "eiffel", "title": "Eiffel Tower", "text": "The Eiffel Tower in Paris was completed in 1889."},
    {
        "doc_id": "bridge",
        "title": "Tower Bridge",
        "text": "Tower Bridge crosses the Thames in London and opened in 1894.",
    },
    {"doc_id": "cat", "title": "Cat", "text": "Domestic cats are small carnivorous mammals kept as pets."},
]
# (text, fact-checkable, cited, flagged, documents judged for it by the citation stage)
SENTENCES = [
    ("The Eiffel Tower was completed in 1889.", True, ["eiffel"], False, ["eiffel", "bridge"]),
    ("I think it looks great.", False, [], False, None),
    ("Tower Bridge opened in 1894 in London.", True, ["bridge", "eiffel"], False, ["bridge", "eiffel"]),
    ("Giraffes sleep four hours a day.", True, [], True, ["cat", "bridge"]),
    ("The Louvre has a glass pyramid.", True, [], True, []),  # everything cut: nothing to check against
]


def record(status, confidence, citations, stated=None):
    return json.dumps(
        {
            "verdict": stated or status,
            "checked": [
                {
                    "claim_id": "c1",
                    "status": status,
                    "confidence": confidence,
                    "why": f"{status} by the evidence",
                    "citations": citations,
                }
            ],
        }
    )


VERIFIER = [
    # sentence 0 (cited: eiffel): an invalid citation, fixed by the retry; stable after two rounds
    {"when_all": ["Statement: The Eiffel Tower", "Previous verdict"], "answer": record("supported", 0.95, ["e1"])},
    {"when_all": ["Statement: The Eiffel Tower", "Problem:"], "answer": record("supported", 0.95, ["e1"])},
    {"when_all": ["Statement: The Eiffel Tower"], "answer": record("supported", 0.95, ["e9"])},
    # sentence 2 (cited: bridge, eiffel): confidently contradicted by e1 (bridge) in every round
    {"when_all": ["Statement: Tower Bridge"], "answer": record("contradicted", 0.9, ["e1"])},
    # sentence 3 (flagged): too weak at first, then supported twice
    {"when_all": ["Statement: Giraffes", "Previous verdict"], "answer": record("supported", 0.93, ["e1"])},
    {"when_all": ["Statement: Giraffes"], "answer": record("supported", 0.8, ["e1"])},
]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "kb.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    return str(path)


@pytest.fixture
def cited(make_samples):
    """What the citation stage hands on: sentences with citations, and the judged documents."""
    table = make_samples([("p0", "c0", "Which towers are these?", " ".join(s[0] for s in SENTENCES), ["cd" * 32])])
    sentences = [
        {
            "index": i,
            "text": text,
            "fact_checkable": fc,
            "text_citations": cites,
            "image_citations": [],
            "flagged": flagged,
        }
        for i, (text, fc, cites, flagged, _) in enumerate(SENTENCES)
    ]
    retrieved = [{"index": i, "doc_ids": docs} for i, (*_, docs) in enumerate(SENTENCES) if docs is not None]
    return table.append_column("sentences", pa.array([sentences], type=pa.list_(SENTENCE))).append_column(
        "retrieved_text", pa.array([retrieved], type=RETRIEVED)
    )


def test_gated_verdicts_change_citations(cited, corpus, make_pool, stage_ctx):
    pool = make_pool({"verifier": (VERIFIER, None, False)})
    stage = VerifySentences([corpus], SentenceVerification(verifier="verifier"))
    result = stage.run(cited, stage_ctx(pool))
    sentences = result.kept["sentences"].to_pylist()[0]
    assert [(s["text_citations"], s["flagged"]) for s in sentences] == [
        (["eiffel"], False),  # supported: unchanged
        ([], False),  # not fact-checkable: untouched
        (["eiffel"], True),  # contradicted by bridge: only that citation removed, flagged
        (["cat"], False),  # supported with a citation: the verifier's document is cited
        ([], True),  # no evidence: not verified
    ]
    rows = {d.context_id: d for d in result.decisions if d.check == CHECK_SENTENCE}
    assert {k: (d.verdict, *(d.detail.get(n) for n in ("rounds", "stopped", "gated"))) for k, d in rows.items()} == {
        "s0": ("supported", 2, "stable", True),
        "s2": ("contradicted", 3, "max_rounds", True),
        "s3": ("supported", 3, "stable", True),
        "s4": ("insufficient", None, None, None),
    }
    assert rows["s3"].detail["round_verdicts"] == ["insufficient", "supported", "supported"]
    assert rows["s3"].detail["evidence"] == {"e1": "cat", "e2": "bridge"}
    assert rows["s2"].detail["before"] == {"text_citations": ["bridge", "eiffel"], "flagged": False}
    assert rows["s2"].detail["after"] == {"text_citations": ["eiffel"], "flagged": True}
    # the contradiction did not end the rounds: each was verified and revised in turn
    assert [r["removed"] for r in rows["s2"].detail["revisions"]] == [["bridge"], [], []]
    assert rows["s0"].detail["claims"] == [
        {"id": "c1", "type": "existence", "text": "The Eiffel Tower was completed in 1889.", "targets": []}
    ]
    claims = [d for d in result.decisions if d.check == CHECK_CLAIM]
    assert [(d.context_id, d.verdict, d.detail["round"], d.detail["confident"]) for d in claims] == [
        ("s0/c1", "supported", 1, True),
        ("s0/c1", "supported", 2, True),
        ("s2/c1", "contradicted", 1, True),
        ("s2/c1", "contradicted", 2, True),
        ("s2/c1", "contradicted", 3, True),
        ("s3/c1", "supported", 1, False),
        ("s3/c1", "supported", 2, True),
        ("s3/c1", "supported", 3, True),
    ]
    assert claims[-1].detail["documents"] == ["cat"] and claims[-1].detail["threshold"] == 0.82
    assert {d.model for d in claims} == {"verifier"}
    counts = result.counts
    assert (
        counts["verified"],
        counts["supported"],
        counts["contradicted"],
        counts["changed"],
        counts["citations_added"],
        counts["citations_removed"],
        counts["rounds"],
    ) == (3, 2, 1, 2, 1, 1, 8)
    assert counts["no_evidence"] == 1 and counts["insufficient"] == 1 and counts["sentences"] == 4
    assert result.components == {"claim_extractor": "heuristic-claims-v1", "claim_verifier": "llm:verifier"}


def test_errors_leave_sentences_as_cited(cited, corpus, make_pool, stage_ctx):
    pool = make_pool(
        {
            "verifier": ([], "they look fine", False),
            "extractor": (
                [{"when_all": ["Statement: Giraffes"], "answer": "no claims here"}],
                json.dumps({"claims": [{"id": "c1", "type": "existence", "text": "x", "targets": []}]}),
                False,
            ),
        }
    )
    stage = VerifySentences([corpus], SentenceVerification(verifier="verifier", claims="extractor"))
    result = stage.run(cited, stage_ctx(pool))
    before = cited["sentences"].to_pylist()[0]
    assert result.kept["sentences"].to_pylist()[0] == before
    rows = {d.context_id: d for d in result.decisions if d.check == CHECK_SENTENCE}
    assert {k: d.verdict for k, d in rows.items()} == {
        "s0": "error",
        "s2": "error",
        "s3": "error",
        "s4": "insufficient",
    }
    assert rows["s3"].detail["error"].startswith("claim extraction: invalid reply: reply is not one JSON object")
    assert rows["s0"].detail["error"] == "invalid reply: reply is not one JSON object"
    assert rows["s0"].detail["raw"] == ["they look fine", "they look fine"]
    assert result.counts["errors"] == 3 and result.counts["changed"] == 0
    assert result.components["claim_extractor"] == "llm:extractor"


def test_needs_the_citation_output(cited, corpus, stage_ctx):
    with pytest.raises(MmcurateError, match="retrieved_text"):
        VerifySentences([corpus], SentenceVerification(verifier="v")).run(
            cited.drop_columns(["retrieved_text"]), stage_ctx()
        )
