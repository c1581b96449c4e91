"""CRUISE's verification-first answering: the gate's truth table, strict confidence parsing,
and the whole system on a scripted model."""

from __future__ import annotations

import itertools
import json

import pytest

from mmcurate.evaluation.verify_first import IDK, VerifyFirst, gate, parse_confidence, verify_first_answers


@pytest.mark.parametrize(
    "time_sensitive, has_context, consistent, confidence",
    itertools.product([False, True], [False, True], [False, True], [0.0, 0.85, 0.9, 0.95, 1.0]),
)
def test_gate_truth_table(time_sensitive, has_context, consistent, confidence):
    answered, reason = gate(time_sensitive, has_context, consistent, confidence)
    threshold = 0.9 if has_context else 1.0
    expected = (not (time_sensitive and not has_context)) and consistent and confidence >= threshold
    assert answered is expected
    if time_sensitive and not has_context:
        assert reason == "time-sensitive question and no retrieved context"
    elif not consistent:
        assert reason == "the answers with and without context disagree"
    elif not answered:
        assert reason.startswith(f"confidence {confidence:g} below {threshold:g}")


def test_retrieval_gate_tests_the_reranked_score():
    """Algorithm 1's first line: isRealTime and S_ret < tau_ret -> "I don't know", even when a
    chunk survived the cutoff (issue 21, item 12); the earlier reading is a named switch."""
    assert gate(True, True, True, 1.0, retrieval_score=0.3) == (
        False,
        "time-sensitive question and retrieval score 0.3 below tau_ret 0.5",
    )
    assert gate(True, True, True, 1.0, retrieval_score=0.3, tau_ret=0.25)[0]
    assert gate(True, True, True, 1.0, retrieval_score=0.7)[0]
    assert not gate(True, False, True, 1.0, retrieval_score=0.0)[0]  # nothing retrieved: S_ret 0
    assert gate(False, True, True, 1.0, retrieval_score=0.0)[0]  # only time-sensitive questions
    assert gate(True, True, True, 1.0, retrieval_score=0.3, reading="context")[0]  # "no context survived"
    # evidence given by a scenario has no score: the context reading, whatever the switch
    assert gate(True, True, True, 1.0)[0] and not gate(True, False, True, 1.0)[0]


def test_thresholds_are_settings():
    assert gate(False, True, True, 0.8, with_context=0.75) == (
        True,
        "consistent, confidence 0.8 >= 0.75 (with context)",
    )
    assert gate(False, False, True, 0.95, without_context=0.9)[0]


@pytest.mark.parametrize(
    "reply, value",
    [
        ("CONFIDENCE: 0.9\nREASONING: fine\nSUB-QUESTIONS: Q1: who?, Finding: Supported", 0.9),
        ("**Confidence:** 1.0", 1.0),
        ("\n  confidence: .5  \nREASONING: x", 0.5),
        ("CONFIDENCE: 1.2", None),
        ("CONFIDENCE: high", None),
        ("REASONING: fine\nCONFIDENCE: 0.9", None),  # the confidence must come first
        ("I am 90% confident.", None),
        ("", None),
    ],
)
def test_confidence_parsing_is_strict(reply, value):
    assert parse_confidence(reply) == value


def rules():
    def router(q, external, realtime):
        return [
            {
                "when_all": [f"Question: {q}", "OUTSIDE KNOWLEDGE:"],
                "answer": f"OUTSIDE KNOWLEDGE: {external}\nTIME-SENSITIVE: {realtime}",
            }
        ]

    def answers(q, with_context, without):
        return [
            {"when_all": [f"Question: {q}", "Evidence:"], "when_none": ["Proposed answer"], "answer": with_context},
            {"when_all": [f"Question: {q}"], "when_none": ["Proposed answer", "Evidence:"], "answer": without},
        ]

    def judge(q, consistent, cov):
        return [
            {"when_all": [f"Question: {q}", "Proposed answer 1"], "answer": consistent},
            {"when_all": [f"Question: {q}", "Proposed answer:"], "answer": cov},
        ]

    return [
        # Q1: outside knowledge, evidence, agreeing answers, confident: answered with the evidence's answer
        *router("Q1 who built it?", "yes", "no"),
        *judge("Q1", "Yes.", "CONFIDENCE: 0.95\nREASONING: the evidence says so"),
        *answers("Q1", "Gustave Eiffel", "Eiffel"),
        # Q2: time-sensitive, and the router skips retrieval: abstain before answering
        *router("Q2 price today?", "no", "yes"),
        # Q3: no outside knowledge needed: evidence dropped, 0.95 is below the 1.0 needed without context
        *router("Q3 what colour?", "no", "no"),
        *judge("Q3", "yes", "CONFIDENCE: 0.95"),
        *answers("Q3", "red", "red"),
        # Q4: the two answers disagree: abstain without asking the verifier
        *router("Q4 which year?", "yes", "no"),
        *judge("Q4", "no", "CONFIDENCE: 1.0"),
        *answers("Q4", "1889", "1901"),
        # Q5: the verifier never gives a readable confidence: abstain, counted as a gate error
        *router("Q5 how tall?", "yes", "no"),
        *judge("Q5", "yes", "Very confident!"),
        *answers("Q5", "330 m", "330 metres"),
        # Q6: the answer without context fails (no rule matches it): a failed answer
        *router("Q6 who?", "yes", "no"),
        {"when_all": ["Question: Q6", "Evidence:"], "when_none": ["Proposed answer"], "answer": "someone"},
        # Q7: the router's reply is unreadable twice
        {"when_all": ["Question: Q7"], "answer": "maybe"},
    ]


def test_system_on_a_scripted_model(world, make):
    world.add("m", rules(), default=None)
    questions = [
        "Q1 who built it?",
        "Q2 price today?",
        "Q3 what colour?",
        "Q4 which year?",
        "Q5 how tall?",
        "Q6 who?",
        "Q7 is it open?",
    ]
    rows = [make.sample(f"s{n}", q, ["x"]) for n, q in enumerate(questions, 1)]
    evidence = [
        {"context_id": "g", "modality": "text", "text": "Built by Gustave Eiffel.", "image": None, "title": "T"}
    ]
    contexts = [evidence, None, evidence, evidence, evidence, evidence, evidence]
    out = verify_first_answers(rows, contexts, world.pool, VerifyFirst("m"), keys=[f"k{n}" for n in range(1, 8)])
    got = {r["key"]: r for r in out.to_pylist()}
    assert got["k1"]["answer"] == "Gustave Eiffel" and got["k1"]["abstained"] is False
    assert got["k1"]["reason"] == "consistent, confidence 0.95 >= 0.9 (with context)"
    trace = json.loads(got["k1"]["trace"])
    assert trace["checks"] == ["router", "answers", "consistency", "chain_of_verification"]
    assert trace["answers"] == {"with_context": "Gustave Eiffel", "without_context": "Eiffel"}
    assert trace["consistency"]["label"] == "yes" and trace["confidence"]["label"] == 0.95
    assert trace["confidence"]["threshold"] == 0.9 and trace["context"]["used"] == 1

    assert (got["k2"]["answer"], got["k2"]["reason"]) == (IDK, "time-sensitive question and no retrieved context")
    assert json.loads(got["k2"]["trace"])["checks"] == ["router"]
    assert got["k3"]["answer"] == IDK and got["k3"]["reason"] == "confidence 0.95 below 1 (without context)"
    assert json.loads(got["k3"]["trace"])["context"] == {
        "available": 1,
        "used": 0,
        "retrieval": "skipped by the router",
    }
    assert got["k4"]["reason"] == "the answers with and without context disagree"
    assert json.loads(got["k4"]["trace"])["checks"] == ["router", "answers", "consistency"]
    assert got["k5"]["answer"] == IDK and got["k5"]["gate_error"].startswith("chain_of_verification: unparsable")
    assert json.loads(got["k5"]["trace"])["confidence"]["raw"] == ["Very confident!", "Very confident!"]
    assert got["k6"]["answer"] is None and got["k6"]["abstained"] is None and "no scripted rule" in got["k6"]["error"]
    assert got["k7"]["answer"] == IDK and got["k7"]["gate_error"].startswith("router: unparsable answer")
    assert all(r["gate_error"] is None for k, r in got.items() if k not in ("k5", "k7"))
    # the checks that were not needed were never asked
    sent = [key for _, key in world.sent["m"]]
    assert not any(key.startswith("k2/with") or key.startswith("k4/cov") for key in sent)
    assert "k1/cov" in sent and "k3/cov" in sent


def test_a_separate_router_model(world, make):
    world.add(
        "router",
        [{"when_all": ["OUTSIDE KNOWLEDGE:"], "answer": "OUTSIDE KNOWLEDGE: yes\nTIME-SENSITIVE: yes"}],
        default=None,
    )
    world.add("m", [], default=None)
    rows = [make.sample("s1", "What is the score now?", ["x"])]
    out = verify_first_answers(rows, [[]], world.pool, VerifyFirst("m", router="router"))
    assert out.to_pylist()[0]["answer"] == IDK and "m" not in world.sent


def test_the_lexical_stand_in_reads_what_the_answers_add_to_the_question() -> None:
    """Issue 37: the lexical verifier's two checks, on the words an answer adds to the question."""
    from mmcurate.evaluation.verify_first import lexical_confidence, lexical_consistent

    question = "What is the scientific name of this animal?"
    assert lexical_consistent("Its scientific name is Felis catus.", "Felis catus, a cat.", question)
    assert not lexical_consistent("The scientific name is Felis catus.", "The scientific name is Anaconda.", question)
    evidence = [{"title": "Cat", "text": "The cat (Felis catus) is a small domesticated carnivorous mammal."}]
    assert lexical_confidence("The scientific name is Felis catus.", evidence, question) == 1.0
    assert lexical_confidence("Felis silvestris catus.", evidence, question) == 0.67
    assert lexical_confidence("Felis catus.", [], question) == 0.0
