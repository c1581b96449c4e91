"""Judging model answers to samples: what Stage I, Stage III and the evaluation share.

Failures are never grades: a call that failed after retries (``text is None``) or an
answer the judge could not grade (JUDGE_ERROR) gets the verdict ``error``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from mmcurate.core.errors import ConfigError
from mmcurate.core.ledger import Decision
from mmcurate.judging.simpleqa import Judge, JudgeItem, Judgement
from mmcurate.models.requests import ChatResponse

if TYPE_CHECKING:
    from mmcurate.judging.recorded import RecordedAnswers

T = TypeVar("T")

CORRECT, INCORRECT, NOT_ATTEMPTED, JUDGE_ERROR = "CORRECT", "INCORRECT", "NOT_ATTEMPTED", "JUDGE_ERROR"
ERROR = "error"  # a failed call: verdict of its ledger row, never a grade


def grade_name(grade: Any) -> str:
    """``Grade.CORRECT`` (enum) or ``"CORRECT"`` -> ``"CORRECT"``."""
    return str(getattr(grade, "name", grade))


def numeric_ranges(meta_json: str | None) -> tuple[tuple[float, float], ...]:
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
        decisions.append(
            Decision(
                row["sample_id"],
                stage,
                check,
                verdict,
                model=model,
                context_id=context_ids[index] if context_ids else None,
                detail=answer_detail(resp, judgement),
            )
        )
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
    responses = [
        ChatResponse(key=str(index), model=model, text=answer, error=None, cached=True, latency=0.0)
        for index, (_, answer) in enumerate(answered)
    ]
    return record_answers(judge, model, [row for row, _ in answered], responses, stage, check, decisions, context_ids)


@dataclass
class GradedAnswers(Generic[T]):
    """The ``on_answers`` and ``replay`` of ``models.schedule.model_major`` for a check whose
    answers the judge grades (Stage I, Stage III's gold and distractor checks). A model's
    answers, or in a re-curation the answers the parent release recorded
    (``judging.recorded``), become one ledger row each under ``check``, and their verdicts go
    to ``settle(model, items, verdicts)``. ``locate(item)`` is the item's sample row and the
    context it is about (None: the sample itself)."""

    judge: Judge
    stage: str
    check: str
    decisions: list[Decision]
    settle: Callable[[str, list[T], list[str]], None]
    recorded: RecordedAnswers | None = None
    locate: Callable[[T], tuple[Mapping[str, Any], str | None]] = lambda row: (row, None)  # type: ignore[assignment, return-value]  # default for T a sample row
    requests: int = 0  # answers the models gave in this run (not the replayed ones)

    def on_answers(self, model: str, answered: list[tuple[T, ChatResponse]]) -> None:
        self.requests += len(answered)
        items = [item for item, _ in answered]
        rows, contexts = self._located(items)
        self.settle(
            model,
            items,
            record_answers(
                self.judge,
                model,
                rows,
                [resp for _, resp in answered],
                self.stage,
                self.check,
                self.decisions,
                contexts,
            ),
        )

    @property
    def replay(self) -> Callable[[str, list[T]], list[T]] | None:
        """Settle from the recorded answers what they settle, return the rest (None: not a re-curation)."""
        return self._replay if self.recorded is not None else None

    def _replay(self, model: str, pending: list[T]) -> list[T]:
        assert self.recorded is not None
        settled, rest = self.recorded.replay(
            model, pending, self._where, self.check, self.decisions, self.judge.name, self._regrade
        )
        self.settle(model, [item for item, _ in settled], [verdict for _, verdict in settled])
        return rest

    def _regrade(self, model: str, answered: list[tuple[T, str]]) -> list[str]:
        rows, contexts = self._located([item for item, _ in answered])
        return regrade_answers(
            self.judge,
            model,
            [(row, text) for row, (_, text) in zip(rows, answered)],
            self.stage,
            self.check,
            self.decisions,
            contexts,
        )

    def _where(self, item: T) -> tuple[str, str | None]:
        row, context_id = self.locate(item)
        return row["sample_id"], context_id

    def _located(self, items: list[T]) -> tuple[list[Mapping[str, Any]], list[str | None]]:
        located = [self.locate(item) for item in items]
        return [row for row, _ in located], [context_id for _, context_id in located]
