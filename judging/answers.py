"""Judging model answers to samples: what Stage I, Stage III and the evaluation share.

Failures are never grades: a call that failed after retries (``text is None``) or an
answer the judge could not grade (JUDGE_ERROR) gets the verdict ``error``.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mmcurate.core.errors import ConfigError
from mmcurate.core.ledger import Decision

from mmcurate.judging.simpleqa import Judge, JudgeItem, Judgement
from mmcurate.models.requests import ChatResponse

CORRECT, INCORRECT, NOT_ATTEMPTED, JUDGE_ERROR = "CORRECT", "INCORRECT", "NOT_ATTEMPTED", "JUDGE_ERROR"
ERROR = "error"  # a failed call: verdict of its ledger row, never a grade


def grade_name(grade: Any) -> str:
    """``Grade.CORRECT`` (enum) or ``"CORRECT"`` -> ``"CORRECT"``."""
    return str(getattr(grade, "name", grade))


def numeric_ranges(meta_json: str | None) -> tuple:
    """InfoSeek's numeric answer ranges from ``meta["numeric_ranges"]`` as ``(low, high)`` pairs."""
    try:
        meta = json.loads(meta_json or "{}")
    except ValueError:
        return ()
    out = []
    for item in meta.get("numeric_ranges") or ():
        rng = item.get("range") if isinstance(item, Mapping) else item
        if isinstance(rng, Sequence) and len(rng) == 2:
            out.append((float(rng[0]), float(rng[1])))
    return tuple(out)


def grade_responses(
    judge: Judge,
    pairs: Iterable[tuple[Mapping[str, Any], ChatResponse]],
    stage: str,
) -> dict[str, Judgement]:
    """Grade the answered responses (``text`` not None) against their sample's answers.

    ``pairs`` holds (sample row, response); the result is keyed by ``response.key``.
    Failed responses are not graded and get no entry.
    """
    items = [
        JudgeItem(
            key=resp.key,
            question=row["question"],
            gold=list(row["answers"]),
            answer=resp.text,
            numeric_ranges=numeric_ranges(row.get("meta")),
        )
        for row, resp in pairs
        if resp.text is not None
    ]
    if not items:
        return {}
    return {j.key: j for j in judge.grade(items, stage)}


def answer_detail(resp: ChatResponse, judgement: Judgement | None) -> dict[str, Any]:
    detail: dict[str, Any] = {"answer": resp.text}
    if judgement is not None:
        detail["judged_by"] = judgement.by
    if resp.error:
        detail["error"] = resp.error
    if resp.images_dropped:
        detail["images_dropped"] = resp.images_dropped
    return detail


def answer_verdict(resp: ChatResponse, judgement: Judgement | None) -> str:
    """The grade, or ``error`` for a call that failed for good."""
    if resp.text is None or judgement is None:
        return ERROR
    return grade_name(judgement.grade)


def record_answers(
    judge: Judge,
    model: str,
    rows: Sequence[Mapping[str, Any]],
    responses: Sequence[ChatResponse],
    stage: str,
    check: str,
    decisions: list[Decision],
    context_ids: Sequence[str | None] | None = None,
) -> list[str]:
    """Judge each response against its row's answers and append one ledger decision per answer
    (verdict = the grade, or ``error``); return the verdicts in order."""
    graded = grade_responses(judge, zip(rows, responses), stage)
    verdicts = []
    for index, (row, resp) in enumerate(zip(rows, responses)):
        judgement = graded.get(resp.key)
        verdict = answer_verdict(resp, judgement)
        decisions.append(Decision(row["sample_id"], stage, check, verdict, model=model,
                                  context_id=context_ids[index] if context_ids else None,
                                  detail=answer_detail(resp, judgement)))
        verdicts.append(verdict)
    return verdicts


def check_models(models: Sequence[str]) -> list[str]:
    models = list(models)
    if not models:
        raise ConfigError("no gating models given")
    if len(set(models)) != len(models):
        raise ConfigError(f"gating models listed twice: {models}")
    return models


def precondition(row: Mapping[str, Any]) -> str | None:
    """Why a sample cannot be gated or checked (no answer, no gold context), or None."""
    if not [a for a in row["answers"] if a and a.strip()]:
        return "no answers"
    if not row["gold_contexts"]:
        return "no gold context"
    return None


def regrade_answers(
    judge: Judge,
    model: str,
    answered: Sequence[tuple[Mapping[str, Any], str]],
    stage: str,
    check: str,
    decisions: list[Decision],
    context_ids: Sequence[str | None] | None = None,
) -> list[str]:
    """Grade answers ``model`` gave in an earlier release (``judging.recorded``) with this run's
    judge, without asking ``model`` again: one ledger decision per answer, as ``record_answers``."""
    responses = [ChatResponse(key=str(index), model=model, text=answer, error=None, cached=True, latency=0.0)
                 for index, (_, answer) in enumerate(answered)]
    return record_answers(judge, model, [row for row, _ in answered], responses, stage, check, decisions, context_ids)
