"""Kestrel claim records: strict validation, the verdict rule, the change gate and the rounds,
on scripted verifier JSON."""

from __future__ import annotations

import json

import pytest

from mmcurate.benchmarks.shared import ClaimGate
from mmcurate.judging.claim_extraction import extract_claims, heuristic_claims, heuristic_type, parse_claims
from mmcurate.judging.claim_verification import ClaimTask, verify_claims
from mmcurate.judging.claims import (
    Claim,
    Evidence,
    RecordError,
    gated,
    judge_round,
    parse_record,
    refuting,
    stop_reason,
    verdict,
)

CLAIMS = [Claim("c1", "count", "The tower has three floors."), Claim("c2", "colour", "The tower is brown.")]
EVIDENCE = [Evidence("e1", "The tower has three floors.", "doc-a"), Evidence("e2", "It is painted brown.", "doc-b")]
GATE = ClaimGate()  # count 0.90, colour 0.86


def record(*checks, stated="supported"):
    return json.dumps(
        {
            "verdict": stated,
            "checked": [
                {"claim_id": c, "status": s, "confidence": p, "why": "because", "citations": cites}
                for c, s, p, cites in checks
            ],
        }
    )


SUPPORTED = record(("c1", "supported", 0.95, ["e1"]), ("c2", "supported", 0.9, ["e2"]))


def test_valid_record_is_supported_and_gated():
    parsed = parse_record(SUPPORTED, CLAIMS, EVIDENCE)
    assert parsed.of("c1").citations == ("e1",) and parsed.of("c2").confidence == 0.9
    assert verdict(parsed, CLAIMS, GATE) == "supported" and gated(parsed, CLAIMS, GATE)
    fenced = f"```json\n{SUPPORTED}\n```"
    assert parse_record(fenced, CLAIMS, EVIDENCE) == parsed


@pytest.mark.parametrize(
    "reply, reason",
    [
        (record(("c1", "supported", 0.95, ["e9"]), ("c2", "supported", 0.9, ["e2"])), "unknown evidence id 'e9'"),
        (record(("c1", "supported", 0.95, ["e1"]), ("c3", "supported", 0.9, ["e2"])), "unknown claim id 'c3'"),
        (record(("c1", "likely", 0.95, ["e1"]), ("c2", "supported", 0.9, ["e2"])), "status 'likely'"),
        (record(("c1", "supported", 1.2, ["e1"]), ("c2", "supported", 0.9, ["e2"])), "confidence 1.2"),
        (record(("c1", "supported", "0.9", ["e1"]), ("c2", "supported", 0.9, ["e2"])), "confidence '0.9'"),
        (record(("c1", "supported", True, ["e1"]), ("c2", "supported", 0.9, ["e2"])), "confidence True"),
        (record(("c1", "supported", 0.95, ["e1"])), "claim c2 is not checked"),
        (
            record(("c1", "supported", 0.95, ["e1"]), ("c1", "supported", 0.95, ["e1"]), ("c2", "supported", 0.9, [])),
            "checked twice",
        ),
        (record(("c1", "supported", 0.95, ["e1"]), ("c2", "supported", 0.9, ["e2"]), stated="fine"), "verdict 'fine'"),
        ("The claims are supported.", "not one JSON object"),
        ('Here it is: {"verdict": "supported", "checked": []}', "not one JSON object"),
        ('{"verdict": "supported", "checked": [], "note": 1}', "exactly the keys"),
    ],
)
def test_invalid_records_are_rejected_with_the_reason(reply, reason):
    with pytest.raises(RecordError, match=reason.replace("(", r"\(")):
        parse_record(reply, CLAIMS, EVIDENCE)


def test_verdict_rule_and_gate():
    def judged(*checks):
        parsed = parse_record(record(*checks), CLAIMS, EVIDENCE)
        return verdict(parsed, CLAIMS, GATE), gated(parsed, CLAIMS, GATE)

    # low confidence: 0.89 is below count's 0.90, though above colour's 0.86
    assert judged(("c1", "supported", 0.89, ["e1"]), ("c2", "supported", 0.89, ["e2"])) == ("insufficient", False)
    # confidently contradicted with a citation: contradicted, whatever the other claim says
    assert judged(("c1", "contradicted", 0.92, ["e1"]), ("c2", "supported", 0.99, ["e2"])) == ("contradicted", True)
    # contradicted without a citation, or not confidently: not a contradiction
    assert judged(("c1", "contradicted", 0.99, []), ("c2", "supported", 0.99, ["e2"])) == ("insufficient", False)
    assert judged(("c1", "contradicted", 0.5, ["e1"]), ("c2", "supported", 0.99, ["e2"])) == ("insufficient", False)
    # supported but a claim cites nothing: the verdict holds, the gate does not
    assert judged(("c1", "supported", 0.95, ["e1"]), ("c2", "supported", 0.95, [])) == ("supported", False)
    assert judged(("c1", "insufficient", 0.99, []), ("c2", "supported", 0.99, ["e2"])) == ("insufficient", False)
    # per-type thresholds come from the config
    strict = ClaimGate(thresholds={"colour": 0.9})
    parsed = parse_record(
        record(("c1", "supported", 0.95, ["e1"]), ("c2", "supported", 0.88, ["e2"])), CLAIMS, EVIDENCE
    )
    assert verdict(parsed, CLAIMS, GATE) == "supported" and verdict(parsed, CLAIMS, strict) == "insufficient"


def test_thresholds_stay_in_the_papers_range():
    with pytest.raises(ValueError, match=r"\[0.82, 0.9\]"):
        ClaimGate(thresholds={"count": 0.95})
    assert ClaimGate(thresholds={"count": 0.88}).thresholds == {
        "existence": 0.82,
        "colour": 0.86,
        "count": 0.88,
        "position": 0.86,
    }


def test_stop_rules():
    good = parse_record(SUPPORTED, CLAIMS, EVIDENCE)
    weak = parse_record(record(("c1", "supported", 0.5, ["e1"]), ("c2", "supported", 0.5, ["e2"])), CLAIMS, EVIDENCE)
    bad = parse_record(record(("c1", "contradicted", 0.95, ["e1"]), ("c2", "supported", 0.9, ["e2"])), CLAIMS, EVIDENCE)

    def rounds(*records):
        return [judge_round(i, r, CLAIMS, GATE, []) for i, r in enumerate(records, 1)]

    assert stop_reason(rounds(good), GATE) is None  # one supported round is not yet stable
    assert stop_reason(rounds(good, good), GATE) == "stable"
    assert stop_reason(rounds(weak, good), GATE) is None
    assert stop_reason(rounds(weak, good, weak), GATE) == "max_rounds"
    # a confident, cited contradiction does not stop the rounds: the caller revises and goes on
    assert gated(bad, CLAIMS, GATE) and stop_reason(rounds(bad), GATE) is None
    assert stop_reason(rounds(bad, good, good), GATE) == "stable"
    assert stop_reason(rounds(bad, bad, bad), GATE) == "max_rounds"
    assert stop_reason(rounds(None), GATE) == "error"
    # what the caller holds must not change over the supported rounds (Kestrel's stable answer)
    assert stop_reason(rounds(good, good), GATE, held=["No", "Yes", "Yes"]) is None
    assert stop_reason(rounds(weak, good, good), GATE, held=["No", "Yes", "Yes", "Yes"]) == "stable"


def test_refuting_evidence_is_what_contradicted_claims_cite():
    both = parse_record(
        record(("c1", "contradicted", 0.95, ["e1", "e2"]), ("c2", "supported", 0.9, ["e2"])), CLAIMS, EVIDENCE
    )
    assert refuting(both, CLAIMS, GATE) == ["e1", "e2"]
    weak = parse_record(
        record(("c1", "contradicted", 0.5, ["e1"]), ("c2", "contradicted", 0.9, ["e2"])), CLAIMS, EVIDENCE
    )
    assert refuting(weak, CLAIMS, GATE) == ["e2"]  # c1 is not confident (count needs 0.90)


def test_rounds_with_a_scripted_verifier(world):
    weak = record(("c1", "supported", 0.5, ["e1"]), ("c2", "supported", 0.5, ["e2"]))
    world.add(
        "verifier",
        [
            # statement A: weak first, confident once it sees its previous verdict
            {"when_all": ["Statement: A", "Previous verdict (round 2)"], "answer": SUPPORTED},
            {"when_all": ["Statement: A", "Previous verdict (round 1)"], "answer": SUPPORTED},
            {"when_all": ["Statement: A"], "answer": weak},
            # statement B: a citation to an evidence id it was not shown, then a contradiction; the
            # rounds go on, and the verifier supports it twice once it sees its previous verdicts
            {"when_all": ["Statement: B", "Previous verdict"], "answer": SUPPORTED},
            {
                "when_all": ["Statement: B", "Problem: claim c1 cites unknown evidence id 'e7'"],
                "answer": record(("c1", "contradicted", 0.97, ["e1"]), ("c2", "insufficient", 0.2, [])),
            },
            {
                "when_all": ["Statement: B"],
                "answer": record(("c1", "supported", 0.95, ["e7"]), ("c2", "supported", 0.9, [])),
            },
            # statement C: never a valid record
            {"when_all": ["Statement: C"], "answer": "yes, all true"},
        ],
        default=None,
    )
    tasks = [ClaimTask(k, f"{k} tower", CLAIMS, EVIDENCE) for k in ("A", "B", "C")]
    a, b, c = verify_claims(world.pool.client("verifier"), tasks, GATE, "claims")
    assert [r.verdict for r in a.rounds] == ["insufficient", "supported", "supported"]
    assert (a.verdict, a.gated, a.stopped) == ("supported", True, "stable")
    assert [r.verdict for r in b.rounds] == ["contradicted", "supported", "supported"]
    assert b.rounds[0].gated and b.stopped == "stable" and b.verdict == "supported"
    assert len(b.rounds[0].raw) == 2  # the invalid citation cost one retry
    assert c.verdict == "error" and c.stopped == "error" and not c.gated
    assert c.rounds[0].error == "invalid reply: reply is not one JSON object"
    assert c.rounds[0].raw == ["yes, all true", "yes, all true"]


def test_heuristic_claims_are_typed_by_rules():
    assert heuristic_type("The bridge has two towers and three lanes.") == "count"
    assert heuristic_type("The Eiffel Tower was completed in 1889.") == "existence"  # a year is not a count
    assert heuristic_type("Its roof is painted green.") == "colour"
    assert heuristic_type("The lake lies north of the city.") == "position"
    assert heuristic_claims("  The tower is 330 metres tall. ") == [
        Claim("c1", "existence", "The tower is 330 metres tall.")
    ]
    assert heuristic_claims(" ") == []


def test_model_claim_extraction_is_strict(world):
    good = json.dumps({"claims": [{"id": "c1", "type": "count", "text": "It has 3 legs.", "targets": ["stool"]}]})
    world.add(
        "extractor",
        [
            {"when_all": ["Statement: three legs"], "answer": good},
            {"when_all": ["Statement: purple", "Problem:"], "answer": good.replace("count", "shape")},
            {"when_all": ["Statement: purple"], "answer": "c1: it is purple"},
        ],
        default=None,
    )
    ok, bad = extract_claims("extractor", [("k1", "three legs", None), ("k2", "purple", None)], world.pool)
    assert ok.label == [Claim("c1", "count", "It has 3 legs.", ("stool",))]
    assert bad.label is None and "type 'shape'" in bad.error
    assert parse_claims(good)[0].targets == ("stool",)
    with pytest.raises(RecordError, match="1 to 4"):
        parse_claims(json.dumps({"claims": []}))
