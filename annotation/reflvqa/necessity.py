"""RefLVQA stage 2 (seed paper 3.2): keep only pairs whose question needs the image.

Text-only inspector models answer the question (the post title) without the image. An
evaluator model grades each inspector answer against the Reddit answer as ``right`` or
``wrong``. A pair is dropped when more than ``max_right`` inspectors are right: the
question can then be answered without looking at the image.

Inspectors run model-major (``models.schedule.model_major``); after each inspector's batch
the evaluator grades its answers, and a pair that already has ``max_right + 1`` right
inspectors is eliminated: later inspectors are not asked.

Failures are never verdicts. An inspector call that failed (text None) or a grade that
failed or stayed unparsable after one retry is recorded as verdict ``error``. Such a pair
is handled conservatively: it is kept only if it would pass even if every errored
inspector had been right (``right + error <= max_right``); otherwise it is held out with
verdict ``drop`` and reason ``undetermined``. The response cache stores only successful
answers, so a rerun asks again exactly for what failed.

The evaluator is a model (``GraderSpec`` ``<model name>``) or the offline stand-in
``lexical``: an inspector answer is right when the Reddit answer holds enough of its content
words (``LexicalEntailment``, reference as premise). Tiny local chat models grade
right/wrong no better than chance; the stand-in is at least deterministic, and the manifest
names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from mmcurate.core.errors import MmcurateError
from mmcurate.core.ledger import Decision
from mmcurate.core.specs import GraderSpec, Lexical, coerce
from mmcurate.core.stages import Stage, StageContext, StageResult
from mmcurate.judging.entailment import LEXICAL_THRESHOLD, LexicalEntailment
from mmcurate.judging.recorded import RecordedAnswers
from mmcurate.models.labels import Label, ask_labels, first_token_label, label_request
from mmcurate.models.requests import ChatRequest, ChatResponse
from mmcurate.models.schedule import model_major

STAGE = "necessity"
CHECK_INSPECTOR = "necessity.inspector.v1"
CHECK_RULE = "necessity.rule.v1"

INSPECTOR_TEMPLATE = "reflvqa.necessity.inspector.v1"
INSPECTOR_SYSTEM = (
    "You answer questions that people posted online together with a photo. You cannot see "
    "the photo. Answer as well as you can from the question alone, in one to three sentences. "
    "If you are not sure, still give your best answer."
)
GRADE_TEMPLATE = "reflvqa.necessity.grade.v1"
GRADE_SYSTEM = (
    "You grade a candidate answer against a reference answer written by someone who saw the "
    "photo attached to the question. The candidate is right when it gives the same key "
    "information as the reference (same identification, explanation or conclusion) and does "
    "not contradict it; otherwise it is wrong. Reply with exactly one word: right or wrong."
)
GRADE_REMINDER = "Your reply could not be read. Reply with exactly one word: right or wrong."
GRADES = ("right", "wrong")


# ---------------------------------------------------------------------------- prompts
def inspector_messages(question: str) -> list[dict]:
    return [
        {"role": "system", "content": INSPECTOR_SYSTEM},
        {"role": "user", "content": f"Question: {question}"},
    ]


def grade_prompt(question: str, reference: str, candidate: str) -> str:
    return (
        f"Question: {question}\nReference answer: {reference}\nCandidate answer: {candidate}\n"
        "Is the candidate answer right or wrong? Reply with exactly one word: right or wrong."
    )


def inspector_request(row: dict[str, Any]) -> ChatRequest:
    """A text-only inspector answers the post's question without its image."""
    return ChatRequest(key=row["sample_id"], messages=inspector_messages(row["question"]), template=INSPECTOR_TEMPLATE)


def grade_request(row: dict[str, Any], inspector: str, answer: str) -> ChatRequest:
    """The evaluator grades one inspector answer against the Reddit answer."""
    return label_request(
        f"{row['sample_id']}/{inspector}",
        GRADE_SYSTEM,
        grade_prompt(row["question"], row["answers"][0], answer),
        GRADE_TEMPLATE,
    )


# ---------------------------------------------------------------------------- lexical grading
def lexical_grades(references: list[str], answers: list[str], threshold: float | None = None) -> list[Label]:
    """The offline stand-in evaluator (see the module docstring)."""
    judge = LexicalEntailment(LEXICAL_THRESHOLD if threshold is None else threshold)
    return [
        Label("right" if ok else "wrong", [None], None, False, score)
        for ok, score in judge.entails(references, answers)
    ]


# ---------------------------------------------------------------------------- stage
@dataclass
class ImageNecessity(Stage):
    """Drop pairs that more than ``max_right`` text-only inspectors answer right."""

    inspectors: list[str]
    evaluator: GraderSpec
    max_right: int = 1
    recorded: RecordedAnswers | None = None  # a re-curation: the parent release's graded answers
    name = STAGE

    def __post_init__(self) -> None:
        if self.evaluator is None:
            raise MmcurateError("image necessity needs an evaluator (reflvqa.evaluator)")
        self.evaluator = coerce(GraderSpec, self.evaluator)
        if not self.inspectors:
            raise MmcurateError("image necessity needs at least one inspector model")
        if len(set(self.inspectors)) != len(self.inspectors):
            raise MmcurateError(f"inspector models are listed twice: {self.inspectors}")
        if self.max_right < 0:
            raise MmcurateError(f"max_right must be >= 0, got {self.max_right}")

    def run(self, samples: pa.Table, ctx: StageContext) -> StageResult:
        rows = samples.to_pylist()
        for row in rows:
            if not row["answers"]:
                raise MmcurateError(f"sample {row['sample_id']} has no answer to grade against")
        evaluator, max_right = str(self.evaluator), self.max_right
        tally: dict[str, dict[str, int]] = {r["sample_id"]: {"right": 0, "wrong": 0, "error": 0} for r in rows}
        asked: dict[str, list[str]] = {r["sample_id"]: [] for r in rows}
        right_by: dict[str, list[str]] = {r["sample_id"]: [] for r in rows}  # inspectors graded right
        decisions: list[Decision] = []

        def on_answers(model: str, answered: list[tuple[dict, ChatResponse]]) -> None:
            for row, resp in answered:
                asked[row["sample_id"]].append(model)
                if resp.text is None:
                    tally[row["sample_id"]]["error"] += 1
                    decisions.append(
                        Decision(
                            row["sample_id"],
                            STAGE,
                            CHECK_INSPECTOR,
                            "error",
                            model=model,
                            detail={"error": f"inspector call failed: {resp.error}", "evaluator": evaluator},
                        )
                    )
            to_grade = [(row, resp.text) for row, resp in answered if resp.text is not None]
            graded(model, to_grade)

        def graded(model: str, to_grade: list[tuple[dict, str]]) -> list[str]:
            verdicts = []
            for (row, text), grade in zip(to_grade, self._grade(ctx, model, to_grade)):
                verdict = grade.label if grade.ok else "error"
                tally[row["sample_id"]][verdict] += 1
                if verdict == "right":
                    right_by[row["sample_id"]].append(model)
                detail: dict[str, Any] = {"answer": text, "evaluator": evaluator, "grade_raw": grade.raw}
                if grade.error:
                    detail["error"] = grade.error
                decisions.append(
                    Decision(row["sample_id"], STAGE, CHECK_INSPECTOR, verdict, model=model, detail=detail)
                )
                verdicts.append(verdict)
            return verdicts

        def replay(model: str, pending: list[dict]) -> list[dict]:
            assert self.recorded is not None
            settled, rest = self.recorded.replay(
                model, pending, lambda row: (row["sample_id"], None), CHECK_INSPECTOR, decisions, evaluator, graded
            )
            regraded = self.recorded.judge != evaluator  # ``graded`` counted those already
            for row, verdict in settled:
                asked[row["sample_id"]].append(model)
                if not regraded:
                    tally[row["sample_id"]][verdict] += 1
                    if verdict == "right":
                        right_by[row["sample_id"]].append(model)
            return rest

        def eliminated(row: dict) -> bool:
            return tally[row["sample_id"]]["right"] > max_right

        try:
            model_major(
                ctx.pool,
                list(self.inspectors),
                rows,
                lambda row, spec: inspector_request(row),
                on_answers,
                eliminated,
                STAGE,
                replay if self.recorded is not None else None,
            )
        finally:
            if not isinstance(self.evaluator, Lexical):
                ctx.pool.release(self.evaluator.name)

        keep_mask: list[bool] = []
        counts = {"input": len(rows), "kept": 0, "dropped": 0, "undetermined": 0, "eliminated_early": 0}
        for row in rows:
            sid = row["sample_id"]
            t = tally[sid]
            not_asked = [m for m in self.inspectors if m not in asked[sid]]
            if t["right"] > max_right:
                verdict, reason = "drop", "answerable without the image"
            elif t["right"] + t["error"] > max_right:
                verdict, reason = "drop", "undetermined"
            else:
                verdict, reason = "keep", "image needed"
            keep_mask.append(verdict == "keep")
            counts["kept" if verdict == "keep" else "dropped"] += 1
            counts["undetermined"] += reason == "undetermined"
            counts["eliminated_early"] += bool(not_asked)
            decisions.append(
                Decision(
                    sid,
                    STAGE,
                    CHECK_RULE,
                    verdict,
                    model=evaluator,
                    detail={
                        **t,
                        "max_right": max_right,
                        "reason": reason,
                        "inspectors": list(self.inspectors),
                        "not_asked": not_asked,
                        "right_by": right_by[sid],
                        **({"deciding_model": right_by[sid][-1]} if verdict == "drop" and right_by[sid] else {}),
                    },
                )
            )
        kept = samples.filter(pa.array(keep_mask, type=pa.bool_()))
        return StageResult(
            stage=STAGE,
            kept=kept,
            decisions=decisions,
            run_id=ctx.run_id,
            counts=counts,
            extra={"inspectors": list(self.inspectors), "evaluator": evaluator},
            components={"necessity_evaluator": evaluator},
        )

    def _grade(self, ctx: StageContext, model: str, answered: list[tuple[dict, str]]) -> list[Label]:
        """right/wrong for each answered (row, inspector answer)."""
        if not answered:
            return []
        references = [row["answers"][0] for row, _ in answered]
        if isinstance(self.evaluator, Lexical):
            return lexical_grades(references, [text for _, text in answered], self.evaluator.threshold)
        requests = [grade_request(row, model, text) for row, text in answered]
        return ask_labels(
            ctx.pool.client(self.evaluator.name),
            requests,
            GRADES,
            GRADE_REMINDER,
            STAGE,
            lambda response: first_token_label(response, GRADES),
        )
