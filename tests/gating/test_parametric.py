"""Stage I: each gating rule pinned on scripted answers, graded by the lexical judge."""

from __future__ import annotations

import json

import pytest

from mmcurate.benchmarks.deflectionbench import GatingConfig
from mmcurate.core.schema import SAMPLE
from mmcurate.gating.parametric import ParametricGate
from mmcurate.models.requests import text_of


def rows_of(result, check):
    return [d for d in result.decisions if d.check == check]


def verdicts(result):
    return {d.sample_id: d for d in rows_of(result, "gate.verdict")}


def test_correct_by_first_model_drops_and_is_never_sent_to_the_second(world, make):
    a = make.sample("a", "Q-ALPHA which city is this?", ["Paris"])
    b = make.sample("b", "Q-BETA which city is this?", ["Rome"])
    m1 = world.add("m1", [{"when_all": ["Q-ALPHA"], "answer": "Paris"}])
    m2 = world.add("m2", [])
    result = ParametricGate(GatingConfig(pool=[m1, m2])).run(make.table([a, b]), world.ctx("run1"))

    assert result.kept.column("sample_id").to_pylist() == [b["sample_id"]]
    assert result.kept.schema == SAMPLE
    assert [k for _, k in world.sent["m2"]] == [b["sample_id"]]
    assert world.calls("parametric", "m2") == 1 and world.cache.count("m2") == 1
    v = verdicts(result)
    assert v[a["sample_id"]].verdict == "drop" and v[a["sample_id"]].detail["deciding_model"] == "m1"
    assert v[b["sample_id"]].verdict == "keep"
    assert result.convergence == [
        {"n_models": 1, "model": "m1", "retained": 1},
        {"n_models": 2, "model": "m2", "retained": 1},
    ]
    assert result.naive_calls == 4 and result.requests == 3
    answers = [(d.sample_id, d.model, d.verdict) for d in rows_of(result, "gate.answer")]
    assert answers == [
        (a["sample_id"], "m1", "CORRECT"),
        (b["sample_id"], "m1", "INCORRECT"),
        (b["sample_id"], "m2", "INCORRECT"),
    ]
    ledger = result.ledger()
    assert set(ledger.column("stage").to_pylist()) == {"parametric"}
    assert set(ledger.column("run_id").to_pylist()) == {"run1"}
    detail = json.loads(ledger.column("detail")[0].as_py())
    assert detail == {"answer": "Paris", "judged_by": "prejudge.exact"}


def test_all_incorrect_is_kept_and_question_goes_without_context(world, make):
    s = make.sample("a", "Q-ALPHA which city?", ["Paris"])
    # would be correct if the gold context (GOLD-a) leaked into the parametric prompt
    m1 = world.add("m1", [{"when_all": ["GOLD-a"], "answer": "Paris"}])
    m2 = world.add("m2", [{"when_all": ["Evidence"], "answer": "Paris"}])
    result = ParametricGate(GatingConfig(pool=[m1, m2])).run(make.table([s]), world.ctx("r"))
    assert result.kept.num_rows == 1
    assert verdicts(result)[s["sample_id"]].detail["models"] == ["m1", "m2"]
    messages = world.pool.messages["m1"][0]
    assert messages[0]["role"] == "system"
    assert {"type": "image", "sha256": "ab" * 32} in messages[1]["content"]
    assert "Q-ALPHA which city?" in text_of(messages)


@pytest.mark.parametrize(
    ("rule", "answer", "kept"),
    [
        ("all_incorrect", "I don't know", False),  # NOT_ATTEMPTED is not INCORRECT
        ("none_correct", "I don't know", True),
        ("none_correct", "Paris", False),
        ("none_correct", "Berlin", True),
        ("all_incorrect", "Berlin", True),
    ],
)
def test_rules(world, make, rule, answer, kept):
    s = make.sample("a", "Q-ALPHA which city?", ["Paris"])
    m1 = world.add("m1", [], default=answer)
    result = ParametricGate(GatingConfig(pool=[m1], rule=rule)).run(make.table([s]), world.ctx("r"))
    assert (result.kept.num_rows == 1) is kept
    assert verdicts(result)[s["sample_id"]].verdict == ("keep" if kept else "drop")


def test_preconditions_drop_before_any_call(world, make):
    no_answers = make.sample("a", "Q1?", [])
    no_gold = make.sample("b", "Q2?", ["x"], gold=[])
    fine = make.sample("c", "Q3?", ["Paris"])
    m1 = world.add("m1", [])
    result = ParametricGate(GatingConfig(pool=[m1])).run(make.table([no_answers, no_gold, fine]), world.ctx("r"))
    pre = {d.sample_id: d.detail["reason"] for d in rows_of(result, "gate.precondition")}
    assert pre == {no_answers["sample_id"]: "no answers", no_gold["sample_id"]: "no gold context"}
    assert [k for _, k in world.sent["m1"]] == [fine["sample_id"]]
    assert result.naive_calls == 1
    assert result.kept.column("sample_id").to_pylist() == [fine["sample_id"]]


def test_failed_call_is_error_not_incorrect_and_later_models_still_decide(world, make):
    a = make.sample("a", "Q-ALPHA?", ["Paris"])
    b = make.sample("b", "Q-BETA?", ["Rome"])
    # m1 has no rule for Q-BETA and no default: that call fails
    m1 = world.add("m1", [{"when_all": ["Q-ALPHA"], "answer": "Berlin"}], default=None)
    m2 = world.add("m2", [{"when_all": ["Q-ALPHA"], "answer": "Paris"}])
    a_only = ParametricGate(GatingConfig(pool=[m1, m2])).run(make.table([a, b]), world.ctx("r"))
    v = verdicts(a_only)
    assert a_only.kept.num_rows == 0
    assert v[b["sample_id"]].verdict == "error" and v[b["sample_id"]].detail["failed_models"] == ["m1"]
    assert v[a["sample_id"]].verdict == "drop" and v[a["sample_id"]].detail["deciding_model"] == "m2"
    failed = [d for d in rows_of(a_only, "gate.answer") if d.verdict == "error"]
    assert len(failed) == 1 and failed[0].model == "m1" and failed[0].detail["answer"] is None
    assert "error" in failed[0].detail
    # the failed sample was still sent to m2 (it could have dropped it for good)
    assert sorted(k for _, k in world.sent["m2"]) == sorted([a["sample_id"], b["sample_id"]])


def test_rerun_is_fully_cached(world, make):
    s = make.sample("a", "Q-ALPHA?", ["Paris"])
    m1 = world.add("m1", [])
    gating = GatingConfig(pool=[m1])
    first = ParametricGate(gating).run(make.table([s]), world.ctx("r1"))
    second = ParametricGate(gating).run(make.table([s]), world.ctx("r2"))
    assert [r["calls"] for r in world.counter.rows()] == [1]
    assert [r["cache_hits"] for r in world.counter.rows()] == [1]
    assert first.kept.equals(second.kept)


def test_no_forced_guess_by_default_so_a_declining_model_drops_the_sample(world, make):
    """Seed 003 (3.1) asks the gating models for no forced guess: a model that declines is
    NOT_ATTEMPTED, which drops the sample. ``gating.force_guess: true`` asks for a best guess,
    and the same model's wrong guess is INCORRECT, which keeps it."""
    s = make.sample("a", "Q-ALPHA which city?", ["Paris"])
    m1 = world.add("m1", [{"when_all": ["best guess"], "answer": "Rome"}], default="I don't know")
    paper = ParametricGate(GatingConfig(pool=[m1])).run(make.table([s]), world.ctx("r1"))
    assert "guess" not in world.pool.messages["m1"][0][0]["content"]
    assert paper.kept.num_rows == 0 and verdicts(paper)[s["sample_id"]].verdict == "drop"
    assert [d.verdict for d in rows_of(paper, "gate.answer")] == ["NOT_ATTEMPTED"]
    assert paper.components["stage_i_prompt"] == "gate.parametric.v2"
    guessed = ParametricGate(GatingConfig(pool=[m1], force_guess=True)).run(make.table([s]), world.ctx("r2"))
    assert guessed.kept.num_rows == 1 and [d.verdict for d in rows_of(guessed, "gate.answer")] == ["INCORRECT"]
    assert guessed.components["stage_i_prompt"] == "gate.parametric.v1"  # the wording releases had before
