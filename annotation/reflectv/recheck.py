"""ReflectV re-curation: new teachers and verifiers check the released trajectories again.

- A re-checking teacher scores the released dialogue's student answers turn after turn, as
  the dialogue stage's teacher does (it sees the image, the question and the ground truth;
  its own earlier replies are its side of the conversation); the trajectory rules of the
  filter (seed 002, L133) must hold under its scores too: strictly ascending, ending at 10.
  A trajectory that breaks them is removed (``recheck.teacher.rule``, ``drop``, the rule and
  the teacher); one whose reply stayed unreadable is removed as undetermined (``drop``).
- A re-checking verifier looks at every marked turn of each released chain, as the visual
  check does (the marked image the next turn sees, the question, the reflection, the
  anchor); one no (or an unreadable reply) collapses the chain to a QA pair, as a chain
  failing a step after the filter is collapsed in curation (``recheck.marks``, ``collapse``).
- Then the share of chains is brought back to ``rho`` with the formatting stage's rule
  (``formatting.rho_split``, seeded, ``reflectv.rho_rule``): redundant chains collapse; only
  the ``collapse_or_drop`` reading also drops surplus QA pairs.

Each recorded answer of a re-checking model in the parent's ledger (an earlier
re-curation's) is reused; the original teacher and verifier are never asked. The stage sees
the whole release at once (the rho rule is a share of it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from mmcurate.core.ledger import Decision
from mmcurate.core.stages import Stage, StageContext, StageResult
from mmcurate.judging.recorded import RecordedAnswers
from mmcurate.models.labels import ask_labels, ask_parsed, first_token_label, label_request
from mmcurate.models.requests import ChatRequest

from .dialogue import PERFECT, TEACHER_REMINDER, TEACHER_SHAPE, TEACHER_TEMPLATE, parse_teacher, teacher_messages
from .formatting import MULTI, REDUNDANT, RHO_RULES, SINGLE, SURPLUS, TRAJECTORY, render_pair, rho_split
from .turns import parse_turn
from .visual import REMINDER, SYSTEM, TEMPLATE, YES_NO, verify_prompt

STAGE = "recheck"
CHECK_TEACHER_TURN = "recheck.teacher.turn.v1"
CHECK_TEACHER_RULE = "recheck.teacher.rule.v1"
CHECK_MARKS_TURN = "recheck.marks.turn.v1"
CHECK_MARKS = "recheck.marks.v1"
CHECK_SHARE = "recheck.rho.v1"
SCORES = tuple(str(n) for n in range(PERFECT + 1))


def score_rule(scores: list[int]) -> str | None:
    """Why ``scores`` break the trajectory rules (strictly ascending, final 10), or None."""
    for turn, (before, after) in enumerate(zip(scores, scores[1:]), 2):
        if after <= before:
            return f"{'plateau' if after == before else 'dip'} at turn {turn} ({before} -> {after})"
    return None if scores and scores[-1] == PERFECT else f"final score {scores[-1] if scores else None} is not 10"


@dataclass
class RecheckTrajectories(Stage):
    """Re-check released trajectories with new teachers and verifiers (module docstring)."""

    teachers: list[str]
    verifiers: list[str]
    dialogues: dict[str, list[dict[str, Any]]]  # sample_id -> the released dialogue's turns {answer, score, feedback}
    marks: dict[tuple[str, int], int] = field(default_factory=dict)  # (sample_id, turn) -> marks drawn
    rho: float = 0.75
    seed: int = 0
    recorded: RecordedAnswers | None = None
    rho_rule: str = RHO_RULES[0]
    name = STAGE
    shardable = False  # rho is a share of the whole release

    def run(self, samples: pa.Table, ctx: StageContext) -> StageResult:
        rows = {r["sample_id"]: r for r in samples.to_pylist()}
        decisions: list[Decision] = []
        removed: dict[str, str] = {}
        for teacher in self.teachers:
            for sid, reason in self._teacher(
                ctx, teacher, [r for s, r in rows.items() if s not in removed], decisions
            ).items():
                removed[sid] = reason
        collapsed: dict[str, str] = {}
        for verifier in self.verifiers:
            chains = [r for s, r in rows.items() if s not in removed and s not in collapsed and r["format"] == MULTI]
            collapsed.update(self._verifier(ctx, verifier, chains, decisions))
        for sid in collapsed:
            rows[sid] = collapse(rows[sid])
        left = [sid for sid in rows if sid not in removed]
        chains = [sid for sid in left if rows[sid]["format"] == MULTI]
        kept_chains, redundant, surplus = rho_split(
            chains, [s for s in left if rows[s]["format"] == SINGLE], self.rho, self.seed, self.rho_rule
        )
        share = {"rho": self.rho, "rho_rule": self.rho_rule}
        for sid in redundant:
            rows[sid] = collapse(rows[sid])
            decisions.append(Decision(sid, STAGE, CHECK_SHARE, "collapse", detail={**share, "reason": REDUNDANT}))
        for sid in surplus:
            removed[sid] = SURPLUS
            decisions.append(Decision(sid, STAGE, CHECK_SHARE, "drop", detail={**share, "reason": SURPLUS}))
        kept = [rows[sid] for sid in rows if sid not in removed]
        counts = {
            "input": len(rows),
            "removed_by_teachers": len(removed) - len(surplus),
            "collapsed": len(collapsed),
            "collapsed_for_rho": len(redundant),
            "dropped_for_rho": len(surplus),
            "kept": len(kept),
            "multi_turn": sum(r["format"] == MULTI for r in kept),
        }
        return StageResult(
            stage=STAGE,
            kept=pa.Table.from_pylist(kept, schema=TRAJECTORY),
            decisions=decisions,
            run_id=ctx.run_id,
            counts=counts,
            extra={"removed": removed, "collapsed": collapsed},
            components={
                **{f"recheck_teacher:{t}": t for t in self.teachers},
                **{f"recheck_verifier:{v}": v for v in self.verifiers},
            },
        )

    def _teacher(
        self, ctx: StageContext, teacher: str, rows: list[dict[str, Any]], decisions: list[Decision]
    ) -> dict[str, str]:
        """Score every released dialogue with ``teacher``, turn by turn in lockstep; the samples
        whose scores break the rules, with why."""
        replies: dict[str, list[dict[str, Any]]] = {r["sample_id"]: [] for r in rows}
        failed: dict[str, str] = {}
        depth = max((len(self.dialogues[r["sample_id"]]) for r in rows), default=0)
        client = None
        for number in range(1, depth + 1):
            active = [r for r in rows if r["sample_id"] not in failed and number <= len(self.dialogues[r["sample_id"]])]
            asking: list[tuple[dict[str, Any], ChatRequest]] = []
            for row in active:
                sid = row["sample_id"]
                answer = self.dialogues[sid][number - 1]["answer"]
                hit = self.recorded.lookup(CHECK_TEACHER_TURN, teacher, (sid, f"t{number}")) if self.recorded else None
                if hit is not None and self.recorded:
                    replies[sid].append({"answer": answer, "score": int(hit[0]), "feedback": hit[1]["feedback"]})
                    decisions.append(
                        Decision(
                            sid,
                            STAGE,
                            CHECK_TEACHER_TURN,
                            hit[0],
                            model=teacher,
                            context_id=f"t{number}",
                            detail={**hit[1], "recorded_in": self.recorded.release},
                        )
                    )
                    continue
                asking.append(
                    (
                        row,
                        ChatRequest(
                            f"{sid}/t{number}",
                            teacher_messages(row["question"], row["answers"], row["image"], replies[sid], answer),
                            TEACHER_TEMPLATE,
                        ),
                    )
                )
            if not asking:
                continue
            client = client or ctx.pool.client(teacher)
            labels = ask_parsed(
                client,
                [request for _, request in asking],
                [parse_teacher] * len(asking),
                TEACHER_REMINDER,
                STAGE,
                TEACHER_SHAPE,
            )
            for (row, _), label in zip(asking, labels):
                sid, answer = row["sample_id"], self.dialogues[row["sample_id"]][number - 1]["answer"]
                if not label.ok:
                    failed[sid] = f"undetermined: {teacher}'s reply unreadable at turn {number}"
                    decisions.append(
                        Decision(
                            sid,
                            STAGE,
                            CHECK_TEACHER_TURN,
                            "error",
                            model=teacher,
                            context_id=f"t{number}",
                            detail={"raw": label.raw, "error": label.error},
                        )
                    )
                    continue
                score, feedback = label.label
                replies[sid].append({"answer": answer, "score": score, "feedback": feedback})
                decisions.append(
                    Decision(
                        sid,
                        STAGE,
                        CHECK_TEACHER_TURN,
                        str(score),
                        model=teacher,
                        context_id=f"t{number}",
                        detail={"answer": answer, "feedback": feedback, "raw": label.raw},
                    )
                )
        if client is not None:
            ctx.pool.release(teacher)
        out: dict[str, str] = {}
        for row in rows:
            sid = row["sample_id"]
            broken = failed.get(sid) or score_rule([t["score"] for t in replies[sid]])
            if broken:
                out[sid] = f"{teacher}: {broken}"
            decisions.append(
                Decision(
                    sid,
                    STAGE,
                    CHECK_TEACHER_RULE,
                    "drop" if broken else "pass",
                    model=teacher,
                    detail={
                        "scores": [t["score"] for t in replies[sid]],
                        "deciding_model": teacher,
                        "reason": broken or "strictly ascending, ends at 10",
                    },
                )
            )
        return out

    def _verifier(
        self, ctx: StageContext, verifier: str, chains: list[dict[str, Any]], decisions: list[Decision]
    ) -> dict[str, str]:
        """Ask ``verifier`` about every marked turn of ``chains``; the chains to collapse, with why."""
        places: list[tuple[dict[str, Any], int, Any]] = []  # (row, turn number, parsed turn)
        for row in chains:
            conversation = row["conversation"]
            for number in range(1, len(conversation)):
                turn, _ = parse_turn(conversation[number - 1]["text"])
                if turn is not None:
                    places.append((row, number, turn))
        verdicts: dict[tuple[str, int], str] = {}
        asking = []
        for row, number, turn in places:
            sid = row["sample_id"]
            hit = self.recorded.lookup(CHECK_MARKS_TURN, verifier, (sid, f"t{number}")) if self.recorded else None
            if hit is not None and self.recorded:
                verdicts[(sid, number)] = hit[0]
                decisions.append(
                    Decision(
                        sid,
                        STAGE,
                        CHECK_MARKS_TURN,
                        hit[0],
                        model=verifier,
                        context_id=f"t{number}",
                        detail={**hit[1], "recorded_in": self.recorded.release},
                    )
                )
                continue
            args = turn.arguments
            prompt = verify_prompt(
                row["question"],
                turn.think,
                args["anchor"],
                args["color"],
                args["mark_type"],
                self.marks.get((sid, number), 1),
            )
            asking.append(
                (
                    (sid, number, args["anchor"]),
                    label_request(
                        f"{sid}/t{number}",
                        SYSTEM,
                        [
                            {"type": "image", "sha256": row["conversation"][number]["image"]},
                            {"type": "text", "text": prompt},
                        ],
                        TEMPLATE,
                    ),
                )
            )
        if asking:
            try:
                labels = ask_labels(
                    ctx.pool.client(verifier),
                    [r for _, r in asking],
                    YES_NO,
                    REMINDER,
                    STAGE,
                    lambda response: first_token_label(response, YES_NO),
                )
            finally:
                ctx.pool.release(verifier)
            for ((sid, number, anchor), _), label in zip(asking, labels):
                verdict = label.label if label.ok else "error"
                verdicts[(sid, number)] = verdict
                decisions.append(
                    Decision(
                        sid,
                        STAGE,
                        CHECK_MARKS_TURN,
                        verdict,
                        model=verifier,
                        context_id=f"t{number}",
                        detail={"raw": label.raw, "anchor": anchor, **({"error": label.error} if label.error else {})},
                    )
                )
        out: dict[str, str] = {}
        for row in chains:
            sid = row["sample_id"]
            bad = [(n, v) for (s, n), v in sorted(verdicts.items()) if s == sid and v != "yes"]
            if bad:
                number, verdict = bad[0]
                out[sid] = (
                    f"{verifier}: the marks do not show what turn {number} names"
                    if verdict == "no"
                    else f"{verifier}: undetermined at turn {number}"
                )
            decisions.append(
                Decision(
                    sid,
                    STAGE,
                    CHECK_MARKS,
                    "collapse" if bad else "verified",
                    model=verifier,
                    detail={"deciding_model": verifier, "reason": out.get(sid, "every mark confirmed")},
                )
            )
        return out


def collapse(row: dict[str, Any]) -> dict[str, Any]:
    """A released chain as the QA pair (I_0, q -> final answer) curation collapses a chain to."""
    last, _ = parse_turn(row["conversation"][-1]["text"])
    answer, think = (last.answer, last.think) if last is not None else (row["answers"][0], "")
    return {**row, "format": SINGLE, "depth": 0, "conversation": render_pair(row["image"], answer, think)}


def drawn_marks(ledger: pa.Table) -> dict[tuple[str, int], int]:
    """(sample_id, turn) -> the marks the grounding stage drew, from a release's ledger."""
    import json

    import pyarrow.compute as pc

    from .grounding import CHECK_MARKS as DRAWN
    from .grounding import STAGE as GROUNDING

    rows = ledger.filter(pc.and_(pc.equal(ledger["stage"], GROUNDING), pc.equal(ledger["check"], DRAWN)))
    return {
        (r["sample_id"], int(r["context_id"][1:])): int(json.loads(r["detail"] or "{}").get("marks", 1))
        for r in rows.select(["sample_id", "context_id", "detail"]).to_pylist()
    }
