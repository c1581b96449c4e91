"""ReflectV stage 1 (seed paper 002, section 4.1): student-teacher dialogues over image QA.

A student model sees the image and the question and answers; a teacher model sees the
image, the question and the ground truth, and replies with a score from 0 to 10 and
feedback that must not give the answer away (the FIRE protocol the paper adopts). The
student answers again with the feedback, turn after turn, until the teacher gives 10 or
``max_turns`` answers have been given. Turns run in lockstep over all samples (one student
batch, then one teacher batch per turn), so every call goes through the response cache and
a rerun repeats none.

The teacher's reply is read strictly: ``Score: <0-10>`` on the first line, ``Feedback:
<text>`` after it (``parse_teacher``); an unreadable reply is asked again once with a
reminder, then it is an error (``models.labels.ask_parsed``). A sample whose student call failed or
whose teacher reply stayed unreadable is dropped with reason ``undetermined`` and ledger
verdict ``error``: no score is ever guessed, and a rerun asks again for exactly those.

A sample ingested with a ready-made dialogue (FIRE, ``meta["dialogue"]``) keeps it and costs
no call. One whose dialogue lacks a teacher score on some turn (FIRE may publish dialogues
without them: ``sources/fire.py``) is dropped with reason ``unscored``: the trajectory filter
needs s_t for every turn, and no score is guessed. Output: the samples with their ``turns``
and ``origin`` (``chains``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from mmcurate.core.errors import MmcurateError
from mmcurate.core.ledger import Decision
from mmcurate.core.plural import counted
from mmcurate.core.stages import Stage, StageContext, StageResult
from mmcurate.models.labels import ask_parsed
from mmcurate.models.requests import ChatRequest

from .chains import BUILT, INGESTED, ORIGIN, meta_of, new_turn, with_chains, with_columns

STAGE = "dialogue"
CHECK_TURN = "dialogue.turn.v1"
CHECK_SAMPLE = "dialogue.sample.v1"
STUDENT_TEMPLATE = "reflectv.dialogue.student.v1"
TEACHER_TEMPLATE = "reflectv.dialogue.teacher.v1"
UNSCORED = "unscored"
STUDENT_SYSTEM = (
    "You answer questions about an image. Answer in one or two sentences. When the teacher "
    "comments on your answer, answer the question again, taking the comments into account."
)
TEACHER_SYSTEM = (
    "You are a teacher checking a student's answer to a question about an image. You are "
    "given the correct answer (the ground truth). Judge the student's answer against it for "
    "accuracy, relevance, helpfulness and detail, and reply in exactly this form:\n"
    "Score: <an integer from 0 to 10; give 10 only when the answer agrees with the ground truth>\n"
    "Feedback: <which parts of the answer are wrong or missing, and where in the image to look; "
    "never state the ground truth itself>"
)
TEACHER_REMINDER = (
    "Your reply could not be read. Reply in exactly this form and nothing else:\n"
    "Score: <integer from 0 to 10>\nFeedback: <your feedback>"
)
TEACHER_SHAPE = "'Score: <0-10>' then 'Feedback: <text>'"
PERFECT = 10
_REPLY = re.compile(
    r"\s*\**\s*score\s*\**\s*:\s*\**\s*(\d{1,2})\s*(?:/\s*10)?\s*\**\s*\.?\s*\n+"
    r"\s*\**\s*feedback\s*\**\s*:\s*\**\s*(\S.*?)\s*",
    re.IGNORECASE | re.DOTALL,
)


def parse_teacher(text: str) -> tuple[int, str] | None:
    """(score, feedback) of a reply of exactly the teacher's form, else None."""
    match = _REPLY.fullmatch(text)
    if match is None or not 0 <= int(match.group(1)) <= PERFECT:
        return None
    return int(match.group(1)), match.group(2)


def student_messages(question: str, image: str, turns: list[dict[str, Any]]) -> list[dict]:
    messages: list[dict] = [
        {"role": "system", "content": STUDENT_SYSTEM},
        {
            "role": "user",
            "content": [{"type": "image", "sha256": image}, {"type": "text", "text": f"Question: {question}"}],
        },
    ]
    for turn in turns:
        messages.append({"role": "assistant", "content": turn["answer"]})
        messages.append({"role": "user", "content": f"Teacher: {turn['feedback']}\nPlease answer the question again."})
    return messages


def teacher_messages(
    question: str, truths: list[str], image: str, turns: list[dict[str, Any]], answer: str
) -> list[dict]:
    """The teacher's conversation so far, ending with the student's newest ``answer``."""
    messages: list[dict] = [{"role": "system", "content": TEACHER_SYSTEM}]
    for index, said in enumerate([*(t["answer"] for t in turns), answer]):
        if index == 0:
            text = f"Question: {question}\nGround truth: {' | '.join(truths)}\nStudent answer: {said}"
            messages.append(
                {"role": "user", "content": [{"type": "image", "sha256": image}, {"type": "text", "text": text}]}
            )
        else:
            messages.append({"role": "user", "content": f"Student answer: {said}"})
        if index < len(turns):
            reply = f"Score: {turns[index]['score']}\nFeedback: {turns[index]['feedback']}"
            messages.append({"role": "assistant", "content": reply})
    return messages


class Unscored(ValueError):
    """An ingested dialogue without a teacher score on some turn."""


def ingested_turns(meta: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The dialogue an adapter stored in meta (FIRE), checked; None when there is none;
    ``Unscored`` when a turn has no score."""
    raw = meta.get("dialogue")
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw:
        raise ValueError("meta.dialogue is not a non-empty list")
    missing = [
        number for number, turn in enumerate(raw, start=1) if isinstance(turn, dict) and turn.get("score") is None
    ]
    if missing:
        raise Unscored(
            f"{UNSCORED}: no teacher score for {'turn' if len(missing) == 1 else 'turns'} {', '.join(map(str, missing))} "
            "(the trajectory filter needs one per turn)"
        )
    turns = []
    for turn in raw:
        score = turn.get("score") if isinstance(turn, dict) else None
        if (
            not isinstance(score, int)
            or isinstance(score, bool)
            or not 0 <= score <= PERFECT
            or not isinstance(turn.get("answer"), str)
            or not isinstance(turn.get("feedback"), str)
        ):
            raise ValueError(f"meta.dialogue turn {turn!r} needs answer, score 0-10 and feedback")
        turns.append(new_turn(turn["answer"], score, turn["feedback"]))
    return turns


@dataclass
class BuildDialogues(Stage):
    """Student-teacher dialogues for every sample (see the module docstring)."""

    student: str | None
    teacher: str | None
    max_turns: int = 3
    name = STAGE

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise MmcurateError(f"max_turns must be at least 1, got {self.max_turns}")

    def run(self, samples: pa.Table, ctx: StageContext) -> StageResult:
        rows = samples.to_pylist()
        decisions: list[Decision] = []
        turns: dict[str, list[dict[str, Any]]] = {}
        failed: dict[str, str] = {}
        origin: dict[str, str] = {}
        to_build = []
        for row in rows:
            sid = row["sample_id"]
            try:
                ready = ingested_turns(meta_of(row))
            except Unscored as exc:
                failed[sid] = str(exc)
                continue
            except ValueError as exc:
                failed[sid] = f"ingested dialogue unusable: {exc}"
                continue
            if ready is not None:
                turns[sid], origin[sid] = ready, INGESTED
            elif len(row["images"]) != 1 or not row["answers"]:
                failed[sid] = "needs exactly one image and a ground truth"
            else:
                turns[sid], origin[sid] = [], BUILT
                to_build.append(row)
        if to_build:
            if self.student is None or self.teacher is None:
                raise MmcurateError(
                    f"{counted(len(to_build), 'sample')} without a ready-made dialogue: "
                    "reflectv.student and reflectv.teacher must name models"
                )
            self._build(ctx, to_build, turns, failed, decisions)
        keep_mask, counts = (
            [],
            {
                "input": len(rows),
                "kept": 0,
                "dropped": 0,
                "built": 0,
                "ingested": 0,
                "turns": 0,
                "unscored": sum(r.startswith(UNSCORED) for r in failed.values()),
            },
        )
        for row in rows:
            sid = row["sample_id"]
            reason = failed.get(sid)
            keep_mask.append(reason is None)
            if reason is None:
                counts["kept"] += 1
                counts[origin[sid]] += 1
                counts["turns"] += len(turns[sid])
                if origin[sid] == INGESTED:
                    decisions += [
                        Decision(
                            sid,
                            STAGE,
                            CHECK_TURN,
                            str(t["score"]),
                            context_id=f"t{i + 1}",
                            detail={"answer": t["answer"], "feedback": t["feedback"], "origin": INGESTED},
                        )
                        for i, t in enumerate(turns[sid])
                    ]
            else:
                counts["dropped"] += 1
            decisions.append(
                Decision(
                    sid,
                    STAGE,
                    CHECK_SAMPLE,
                    "keep" if reason is None else "drop",
                    model=self.teacher if origin.get(sid) == BUILT else None,
                    detail={
                        "origin": origin.get(sid),
                        "turns": len(turns.get(sid, [])),
                        "reason": reason or "dialogue complete",
                    },
                )
            )
        kept_rows = [row for row, keep in zip(rows, keep_mask) if keep]
        kept = samples.filter(pa.array(keep_mask, type=pa.bool_()))
        kept = with_chains(kept, [turns[r["sample_id"]] for r in kept_rows], [None] * len(kept_rows))
        kept = with_columns(kept, {ORIGIN: pa.array([origin[r["sample_id"]] for r in kept_rows], type=pa.string())})
        return StageResult(
            stage=STAGE,
            kept=kept,
            decisions=decisions,
            run_id=ctx.run_id,
            counts=counts,
            extra={"student": self.student, "teacher": self.teacher, "max_turns": self.max_turns},
            components={"student": self.student or "none", "teacher": self.teacher or "none"},
        )

    def _build(
        self,
        ctx: StageContext,
        rows: list[dict],
        turns: dict[str, list[dict[str, Any]]],
        failed: dict[str, str],
        decisions: list[Decision],
    ) -> None:
        assert self.student is not None and self.teacher is not None
        student, teacher = ctx.pool.client(self.student), ctx.pool.client(self.teacher)
        active = list(rows)
        for number in range(1, self.max_turns + 1):
            if not active:
                break
            asked = student.chat(
                [
                    ChatRequest(
                        f"{r['sample_id']}/s{number}",
                        student_messages(r["question"], r["images"][0], turns[r["sample_id"]]),
                        STUDENT_TEMPLATE,
                    )
                    for r in active
                ],
                STAGE,
            )
            answered = []
            for row, response in zip(active, asked):
                if response.text is None:
                    failed[row["sample_id"]] = f"undetermined: student call failed at turn {number}"
                    decisions.append(
                        Decision(
                            row["sample_id"],
                            STAGE,
                            CHECK_TURN,
                            "error",
                            model=self.student,
                            context_id=f"t{number}",
                            detail={"error": response.error},
                        )
                    )
                else:
                    answered.append((row, response.text.strip()))
            requests = [
                ChatRequest(
                    f"{r['sample_id']}/t{number}",
                    teacher_messages(r["question"], r["answers"], r["images"][0], turns[r["sample_id"]], answer),
                    TEACHER_TEMPLATE,
                )
                for r, answer in answered
            ]
            replies = ask_parsed(
                teacher, requests, [parse_teacher] * len(requests), TEACHER_REMINDER, STAGE, TEACHER_SHAPE
            )
            active = []
            for (row, answer), reply in zip(answered, replies):
                sid = row["sample_id"]
                detail: dict[str, Any] = {"answer": answer, "student": self.student, "raw": reply.raw}
                if not reply.ok:
                    failed[sid] = f"undetermined: teacher reply unreadable at turn {number}"
                    decisions.append(
                        Decision(
                            sid,
                            STAGE,
                            CHECK_TURN,
                            "error",
                            model=self.teacher,
                            context_id=f"t{number}",
                            detail={**detail, "error": reply.error},
                        )
                    )
                    continue
                score, feedback = reply.label
                turns[sid].append(new_turn(answer, score, feedback))
                decisions.append(
                    Decision(
                        sid,
                        STAGE,
                        CHECK_TURN,
                        str(score),
                        model=self.teacher,
                        context_id=f"t{number}",
                        detail={**detail, "feedback": feedback},
                    )
                )
                if score < PERFECT:
                    active.append(row)
