"""ReflectV stage 2 (seed paper 002, section 4.2): keep only dialogues that show real correction.

Three rules, each a ledger check of its own:

1. ``trajectory.ascending.v1``: scores strictly ascending (s_t+1 > s_t at every turn); a
   failure is a ``plateau`` (equal scores) or a ``dip`` (a lower score), with the turn;
2. ``trajectory.final_score.v1``: the last score is exactly 10;
3. ``trajectory.ground_truth.v1``: the final student answer agrees with the ground truth
   by the run's judge (``judging.simpleqa``), not by the teacher's score, so a misled teacher
   cannot pass a wrong answer.

Rules 1 and 2 ("response-filtered", Figure 5b) are checked on every dialogue and both are
recorded; the judge is asked only about dialogues that pass them ("GT-filtered"). A judge
error is verdict ``error`` and the sample is dropped as ``undetermined``, never passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from mmcurate.core.ledger import Decision
from mmcurate.core.stages import Stage, StageContext, StageResult
from mmcurate.judging.answers import grade_name
from mmcurate.judging.simpleqa import JudgeItem

from .chains import require_chains, turns_of

STAGE = "trajectory"
CHECK_ASCENDING = "trajectory.ascending.v1"
CHECK_FINAL = "trajectory.final_score.v1"
CHECK_TRUTH = "trajectory.ground_truth.v1"
CHECK_RULE = "trajectory.rule.v1"
PERFECT = 10
NOT_ASCENDING, NOT_TEN, WRONG_ANSWER, UNDETERMINED = (
    "scores not strictly ascending",
    "final score is not 10",
    "final answer disagrees with the ground truth",
    "undetermined: the judge could not grade the final answer",
)


def ascending_failure(scores: list[int]) -> dict[str, Any] | None:
    """Where a score sequence stops strictly ascending (first place), or None."""
    for turn in range(1, len(scores)):
        if scores[turn] <= scores[turn - 1]:
            kind = "plateau" if scores[turn] == scores[turn - 1] else "dip"
            return {"kind": kind, "turn": turn + 1, "from": scores[turn - 1], "to": scores[turn]}
    return None


@dataclass
class TrajectoryFilter(Stage):
    """Keep ascending dialogues that end at 10 with an answer the judge accepts."""

    name = STAGE

    def run(self, samples: pa.Table, ctx: StageContext) -> StageResult:
        require_chains(samples, STAGE)
        rows = samples.to_pylist()
        all_turns = turns_of(samples)
        decisions: list[Decision] = []
        reasons: dict[str, list[str]] = {}
        scored = []
        for row, turns in zip(rows, all_turns):
            sid, scores = row["sample_id"], [t["score"] for t in turns]
            failure = ascending_failure(scores)
            decisions.append(
                Decision(
                    sid,
                    STAGE,
                    CHECK_ASCENDING,
                    "fail" if failure else "pass",
                    detail={"scores": scores, **({"failure": failure} if failure else {})},
                )
            )
            decisions.append(
                Decision(
                    sid, STAGE, CHECK_FINAL, "pass" if scores[-1] == PERFECT else "fail", detail={"final": scores[-1]}
                )
            )
            reasons[sid] = ([f"{NOT_ASCENDING} ({failure['kind']} at turn {failure['turn']})"] if failure else []) + (
                [f"{NOT_TEN} ({scores[-1]})"] if scores[-1] != PERFECT else []
            )
            if not reasons[sid]:
                scored.append((row, turns[-1]["answer"]))
        items = [JudgeItem(row["sample_id"], row["question"], list(row["answers"]), answer) for row, answer in scored]
        judged = {j.key: j for j in ctx.judge.grade(items, STAGE)} if items else {}
        for row, answer in scored:
            sid, judgement = row["sample_id"], judged[row["sample_id"]]
            grade = grade_name(judgement.grade)
            verdict = "pass" if grade == "CORRECT" else "error" if grade == "JUDGE_ERROR" else "fail"
            decisions.append(
                Decision(
                    sid,
                    STAGE,
                    CHECK_TRUTH,
                    verdict,
                    model=ctx.judge.name,
                    detail={"answer": answer, "grade": grade, "judged_by": judgement.by},
                )
            )
            if verdict != "pass":
                reasons[sid].append(UNDETERMINED if verdict == "error" else f"{WRONG_ANSWER} ({grade})")
        keep_mask = [not reasons[r["sample_id"]] for r in rows]
        for row, keep in zip(rows, keep_mask):
            decisions.append(
                Decision(
                    row["sample_id"],
                    STAGE,
                    CHECK_RULE,
                    "keep" if keep else "drop",
                    detail={
                        "reason": "; ".join(reasons[row["sample_id"]]) or "reflective trajectory",
                        "reasons": reasons[row["sample_id"]],
                    },
                )
            )
        counts = {
            "input": len(rows),
            "response_filtered": len(scored),
            "kept": sum(keep_mask),
            "dropped": len(rows) - sum(keep_mask),
            "not_ascending": sum(any(r.startswith(NOT_ASCENDING) for r in v) for v in reasons.values()),
            "final_not_10": sum(any(r.startswith(NOT_TEN) for r in v) for v in reasons.values()),
            "ground_truth_mismatch": sum(any(r.startswith(WRONG_ANSWER) for r in v) for v in reasons.values()),
            "undetermined": sum(UNDETERMINED in v for v in reasons.values()),
        }
        return StageResult(
            stage=STAGE,
            kept=samples.filter(pa.array(keep_mask, type=pa.bool_())),
            decisions=decisions,
            run_id=ctx.run_id,
            counts=counts,
            extra={"judge": ctx.judge.name},
            components={"trajectory_judge": ctx.judge.name},
        )
