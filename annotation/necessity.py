"""RefLVQA stage 2 (seed paper 3.2): keep only pairs whose question needs the image.

Text-only inspector models answer the question (the post title) without the image. An
evaluator model grades each inspector answer against the Reddit answer as ``right`` or
``wrong``. A pair is dropped when more than ``max_right`` inspectors are right: the
question can then be answered without looking at the image.

Inspectors run model-major (``gating.schedule.model_major``); after each inspector's batch
the evaluator grades its answers, and a pair that already has ``max_right + 1`` right
inspectors is eliminated: later inspectors are not asked.

Failures are never verdicts. An inspector call that failed (text None) or a grade that
failed or stayed unparsable after one retry is recorded as verdict ``error``. Such a pair
is handled conservatively: it is kept only if it would pass even if every errored
inspector had been right (``right + error <= max_right``); otherwise it is held out with
verdict ``drop`` and reason ``undetermined``. The response cache stores only successful
answers, so a rerun asks again exactly for what failed.

This module also holds the strict-label helper every RefLVQA LLM check uses.
"""
from __future__ import annotations

import math

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from mmcurate.core.errors import MmcurateError
from mmcurate.core.ledger import Decision
from mmcurate.core.stages import StageResult

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
RETRY_SUFFIX = "+retry1"
GRADES = ("right", "wrong")
LABEL_LOGPROBS = 5  # top tokens asked for, so a label can be read from the first token
LABEL_MAX_TOKENS = 8  # a label is one word; a short reply also keeps logprob computation cheap


# ---------------------------------------------------------------------------- strict labels
def strict_label(text: str | None, labels: Sequence[str]) -> str | None:
    """``text`` as one of ``labels`` when it is exactly that word, else None.

    Only case, surrounding whitespace, quotes, markdown emphasis and one final full stop
    or exclamation mark are tolerated: ``"Right."`` -> right, ``"right, because"`` -> None.
    """
    if text is None:
        return None
    word = text.strip().strip("*_`\"'").strip()
    if word[-1:] in (".", "!"):
        word = word[:-1]
    word = word.strip().strip("*_`\"'").strip().lower()
    return word if word in labels else None


def first_token_label(response: Any, labels: Sequence[str]) -> tuple[str, float] | None:
    """The label whose first token carries more probability among the first generated
    token's top logprobs, with its share of the labels' mass; None when no label appears.

    This reads a tiny model's intent even when its text rambles ("The answer is wrong"),
    without accepting free text: only the labels' own token probabilities count."""
    top = response.top_logprobs
    if not top:
        return None
    mass = dict.fromkeys(labels, 0.0)
    for token, logprob in top[0].items():
        word = token.strip().strip("\"'*_.").lower()
        if word in mass and logprob is not None:
            mass[word] += math.exp(logprob)
    total = sum(mass.values())
    if total <= 0:
        return None
    best = max(labels, key=lambda label: mass[label])
    return best, mass[labels[0]] / total


@dataclass(frozen=True)
class Label:
    """A strictly parsed model label: ``label`` None means error (see ``error``)."""

    label: str | None
    raw: list[str | None]  # the answer of each attempt
    error: str | None
    cached: bool = False
    score: float | None = None  # e.g. P(yes) / (P(yes) + P(no)) when decided from logprobs

    @property
    def ok(self) -> bool:
        return self.label is not None


def ask_labels(
    client: Any,
    requests: list[Any],
    labels: Sequence[str],
    reminder: str,
    stage: str,
    decide: Callable[[Any], tuple[str, float] | None] | None = None,
) -> list[Label]:
    """Ask ``requests``; an unparsable answer gets one retry (the conversation continued with
    ``reminder``, a different cache key), then becomes an error. A failed call is an error
    at once (the client already retried it). ``decide(response)`` may settle a first answer
    before its text is parsed (e.g. from token logprobs); returning None falls back to text."""
    first = client.chat(requests, stage)
    out: list[Label | None] = [None] * len(requests)
    retry: list[int] = []
    for i, response in enumerate(first):
        decided = decide(response) if decide is not None and response.text is not None else None
        if response.text is None:
            out[i] = Label(None, [None], f"model call failed: {response.error}")
        elif decided is not None:
            out[i] = Label(decided[0], [response.text], None, response.cached, decided[1])
        else:
            label = strict_label(response.text, labels)
            if label is not None:
                out[i] = Label(label, [response.text], None, response.cached)
            else:
                retry.append(i)
    if retry:
        second = client.chat([_retry_request(requests[i], first[i].text, reminder) for i in retry], stage)
        for i, response in zip(retry, second):
            raw = [first[i].text, response.text]
            label = strict_label(response.text, labels)
            if response.text is None:
                out[i] = Label(None, raw, f"retry failed: {response.error}")
            elif label is None:
                out[i] = Label(None, raw, f"unparsable answer (expected {'/'.join(labels)})")
            else:
                out[i] = Label(label, raw, None)
    return out  # type: ignore[return-value]


def _retry_request(request: Any, answer: str | None, reminder: str) -> Any:
    messages = [*request.messages, {"role": "assistant", "content": answer or ""}, {"role": "user", "content": reminder}]
    return replace(request, messages=messages, template=request.template + RETRY_SUFFIX)


# ---------------------------------------------------------------------------- prompts
def inspector_messages(question: str) -> list[dict]:
    return [
        {"role": "system", "content": INSPECTOR_SYSTEM},
        {"role": "user", "content": f"Question: {question}"},
    ]


def grade_messages(question: str, reference: str, candidate: str) -> list[dict]:
    return [
        {"role": "system", "content": GRADE_SYSTEM},
        {
            "role": "user",
            "content": (
                f"Question: {question}\nReference answer: {reference}\nCandidate answer: {candidate}\n"
                "Is the candidate answer right or wrong? Reply with exactly one word: right or wrong."
            ),
        },
    ]


# ---------------------------------------------------------------------------- lexical grading
LEXICAL_EVALUATOR = "lexical"


def lexical_grades(references: list[str], answers: list[str]) -> list[Label]:
    """The offline stand-in evaluator: an inspector answer is right when the Reddit answer
    contains enough of its content words (``lexical_entailment``, reference as premise).
    Tiny local chat models grade right/wrong no better than chance; this is at least
    deterministic, and the manifest names it."""
    from .entailment import lexical_entailment

    scores = lexical_entailment().entails(references, answers)
    return [Label("right" if ok else "wrong", [None], None, False, score) for ok, score in scores]


# ---------------------------------------------------------------------------- stage
def image_necessity(
    samples: pa.Table,
    pool: Any,
    inspectors: list[str],
    evaluator: str,
    max_right: int = 1,
    run_id: str | None = None,
    schedule: Callable[..., None] | None = None,
) -> StageResult:
    """Drop pairs that more than ``max_right`` text-only inspectors answer right.

    ``pool`` is a ``gating.client.ModelPool``; ``inspectors`` and ``evaluator`` are model
    names in its settings (``evaluator`` may be ``"lexical"``: see ``lexical_grades``). ``schedule`` defaults to ``gating.schedule.model_major``.
    """
    if not inspectors:
        raise MmcurateError("image necessity needs at least one inspector model")
    if not evaluator:
        raise MmcurateError("image necessity needs an evaluator model")
    if len(set(inspectors)) != len(inspectors):
        raise MmcurateError(f"inspector models are listed twice: {inspectors}")
    if max_right < 0:
        raise MmcurateError(f"max_right must be >= 0, got {max_right}")
    if schedule is None:
        from mmcurate.gating.schedule import model_major as schedule

    rows = samples.to_pylist()
    for row in rows:
        if not row["answers"]:
            raise MmcurateError(f"sample {row['sample_id']} has no answer to grade against")
    tally: dict[str, dict[str, int]] = {r["sample_id"]: {"right": 0, "wrong": 0, "error": 0} for r in rows}
    asked: dict[str, list[str]] = {r["sample_id"]: [] for r in rows}
    decisions: list[Decision] = []

    def build(row: dict, spec: Any) -> Any:
        from mmcurate.gating.requests import ChatRequest

        return ChatRequest(key=row["sample_id"], messages=inspector_messages(row["question"]), template=INSPECTOR_TEMPLATE)

    def on_answers(model: str, answered: list[tuple[dict, Any]]) -> None:
        if not answered:
            return
        from mmcurate.gating.requests import ChatRequest

        to_grade = [(row, resp) for row, resp in answered if resp.text is not None]
        for row, resp in answered:
            asked[row["sample_id"]].append(model)
            if resp.text is None:
                tally[row["sample_id"]]["error"] += 1
                decisions.append(Decision(
                    row["sample_id"], STAGE, CHECK_INSPECTOR, "error", model=model,
                    detail={"error": f"inspector call failed: {resp.error}", "evaluator": evaluator},
                ))
        if not to_grade:
            return
        if evaluator == LEXICAL_EVALUATOR:
            grades = lexical_grades([row["answers"][0] for row, _ in to_grade], [resp.text for _, resp in to_grade])
        else:
            requests = [
                ChatRequest(
                    key=f"{row['sample_id']}/{model}",
                    messages=grade_messages(row["question"], row["answers"][0], resp.text),
                    template=GRADE_TEMPLATE,
                    max_tokens=LABEL_MAX_TOKENS,
                    logprobs=LABEL_LOGPROBS,
                )
                for row, resp in to_grade
            ]
            grades = ask_labels(pool.client(evaluator), requests, GRADES, GRADE_REMINDER, STAGE,
                                lambda response: first_token_label(response, GRADES))
        for (row, resp), grade in zip(to_grade, grades):
            verdict = grade.label if grade.ok else "error"
            tally[row["sample_id"]][verdict] += 1
            detail: dict[str, Any] = {"answer": resp.text, "evaluator": evaluator, "grade_raw": grade.raw}
            if grade.error:
                detail["error"] = grade.error
            decisions.append(Decision(row["sample_id"], STAGE, CHECK_INSPECTOR, verdict, model=model, detail=detail))

    def eliminated(row: dict) -> bool:
        return tally[row["sample_id"]]["right"] > max_right

    try:
        schedule(pool, list(inspectors), rows, build, on_answers, eliminated, STAGE)
    finally:
        if evaluator != LEXICAL_EVALUATOR:
            pool.release(evaluator)

    keep_mask: list[bool] = []
    counts = {"input": len(rows), "kept": 0, "dropped": 0, "undetermined": 0, "eliminated_early": 0}
    for row in rows:
        sid = row["sample_id"]
        t = tally[sid]
        not_asked = [m for m in inspectors if m not in asked[sid]]
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
        decisions.append(Decision(
            sid, STAGE, CHECK_RULE, verdict, model=evaluator,
            detail={**t, "max_right": max_right, "reason": reason, "inspectors": list(inspectors), "not_asked": not_asked},
        ))
    kept = samples.filter(pa.array(keep_mask, type=pa.bool_()))
    return StageResult(stage=STAGE, kept=kept, decisions=decisions, run_id=run_id or "", counts=counts,
                       extra={"inspectors": list(inspectors), "evaluator": evaluator})
