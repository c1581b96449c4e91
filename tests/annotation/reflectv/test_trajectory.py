"""The trajectory filter: strictly ascending scores, a final 10, a final answer the judge accepts."""

from __future__ import annotations

from mmcurate.annotation.reflectv.trajectory import TrajectoryFilter, ascending_failure
from mmcurate.core.stages import StageContext
from mmcurate.judging.session import Models
from mmcurate.judging.simpleqa import LLMJudge

Q = "What animal is in the picture?"
CASES = {  # sample -> dialogue (answer, score, feedback)
    "ascending": [("a dog", 3, "No."), ("a fox", 6, "Closer."), ("a cat", 10, "Yes.")],
    "single": [("cat", 10, "Yes.")],
    "plateau": [("a dog", 4, "No."), ("a fox", 4, "No."), ("a cat", 10, "Yes.")],
    "dip": [("a dog", 5, "No."), ("a fox", 3, "Worse."), ("a cat", 10, "Yes.")],
    "not_ten": [("a dog", 4, "No."), ("a fox", 9, "Almost.")],
    "mismatch": [("a dog", 4, "No."), ("a lynx", 10, "Yes.")],  # the teacher was misled
    "dip_and_not_ten": [("a dog", 6, "No."), ("a fox", 2, "No.")],
}


def _run(lab):
    rows = [lab.sample(name, Q, "cat") for name in CASES]
    result = TrajectoryFilter().run(lab.chains(rows, list(CASES.values())), lab.ctx())
    by_id = {row["sample_id"]: row["source_id"] for row in rows}
    decisions = {}
    for d in result.decisions:
        decisions.setdefault(by_id[d.sample_id], {})[d.check] = d
    return result, decisions


def test_each_rule_and_its_ledger_reason(lab) -> None:
    result, decisions = _run(lab)
    assert sorted(result.kept.column("source_id").to_pylist()) == ["ascending", "single"]
    reasons = {name: d["trajectory.rule.v1"].detail["reasons"] for name, d in decisions.items()}
    assert reasons == {
        "ascending": [],
        "single": [],
        "plateau": ["scores not strictly ascending (plateau at turn 2)"],
        "dip": ["scores not strictly ascending (dip at turn 2)"],
        "not_ten": ["final score is not 10 (9)"],
        "mismatch": ["final answer disagrees with the ground truth (INCORRECT)"],
        "dip_and_not_ten": ["scores not strictly ascending (dip at turn 2)", "final score is not 10 (2)"],
    }
    assert decisions["plateau"]["trajectory.ascending.v1"].detail["failure"] == {
        "kind": "plateau",
        "turn": 2,
        "from": 4,
        "to": 4,
    }
    assert decisions["dip"]["trajectory.final_score.v1"].verdict == "pass"  # both score rules are recorded
    assert "trajectory.ground_truth.v1" not in decisions["dip"]  # the judge sees only what passed them
    assert decisions["mismatch"]["trajectory.ground_truth.v1"].verdict == "fail"
    assert decisions["ascending"]["trajectory.ground_truth.v1"].detail["answer"] == "a cat"


def test_counts_make_the_funnel(lab) -> None:
    result, _ = _run(lab)
    assert result.counts == {
        "input": 7,
        "response_filtered": 3,
        "kept": 2,
        "dropped": 5,
        "not_ascending": 3,
        "final_not_10": 2,
        "ground_truth_mismatch": 1,
        "undetermined": 0,
    }


def test_ascending_failure_finds_the_first_break() -> None:
    assert ascending_failure([1, 2, 3]) is None and ascending_failure([10]) is None
    assert ascending_failure([2, 5, 5, 1]) == {"kind": "plateau", "turn": 3, "from": 5, "to": 5}
    assert ascending_failure([7, 3]) == {"kind": "dip", "turn": 2, "from": 7, "to": 3}


def test_a_judge_that_cannot_grade_holds_the_sample_out(lab) -> None:
    judge = lab.model("judge", [], default="it depends")
    ctx = StageContext(lab.pool.settings, "r", lab.store, Models(lab.pool, LLMJudge(lab.pool, judge), lab.counter))
    rows = [lab.sample("ascending", Q, "cat")]
    result = TrajectoryFilter().run(lab.chains(rows, [[("a dog", 3, "No."), ("a cat-like lynx", 10, "Yes.")]]), ctx)
    assert result.kept.num_rows == 0 and result.counts["undetermined"] == 1
    truth = [d for d in result.decisions if d.check == "trajectory.ground_truth.v1"][0]
    assert truth.verdict == "error" and truth.detail["grade"] == "JUDGE_ERROR"
