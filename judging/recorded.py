"""Answers a parent release already holds, so a re-curation decides with them instead of
asking the original models again.

A release's ledger keeps every model answer its curation graded: the check, the model, the
sample and context, the verdict (a grade, ``right``/``wrong``, ``yes``/``no``, a score) and
the answer text in ``detail``. A re-curation that gates the same samples with the original
models plus new ones reads those rows: an original model's recorded verdict settles its
item without a request (the response cache may be absent, as on another machine months
later), and only the new models are asked. Answers are reused only from models whose
identity (backend, weights, revision) is the one the parent release records; a model
redefined since is asked again. When the judge that graded a recorded answer is not the
judge of this run, the recorded answer text is graded again by this run's judge (judge
calls, never calls to the original model). A recorded failure (``error``, ``JUDGE_ERROR``)
settles nothing: that one item is asked again, as a rerun would.

Replayed ledger rows repeat the recorded verdict and detail, plus ``recorded_in`` (the
parent's version), so ``mmcurate why`` shows where a verdict came from.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mmcurate.core.ledger import Decision

T = TypeVar("T")
Key = tuple[str, str, str, str | None, Any]  # (check, model, sample_id, context_id, part)
Where = tuple[str, str | None] | tuple[str, str | None, Any]  # (sample_id, context_id[, part])
Found = tuple[str, dict[str, Any]]  # (verdict, detail)
Regrade = Callable[[str, list[tuple[Any, str]]], list[str]]  # (model, [(item, answer)]) -> verdicts


class RecordedAnswers:
    """The reusable answers of one stage of a parent release (see the module docstring).

    It holds paths and names only and reads the ledger in the process that uses it, so it
    travels cheaply to task-runner workers."""

    def __init__(
        self,
        ledger: Path,
        stage: str,
        models: Sequence[str],
        judge: str | None,
        release: str,
        verdicts: Sequence[str],
        part: str | None = None,
    ) -> None:
        self.ledger = Path(ledger)
        self.stage = stage
        self.models = tuple(models)  # models whose recorded identity matches this run's spec
        self.judge = judge  # what graded the recorded answers (the parent manifest's judge)
        self.release = release
        self.verdicts = tuple(verdicts)  # verdicts that settle an item; others are asked again
        self.part = part  # a detail field that tells apart answers about one (sample, context), e.g. "sentence"
        self._rows: dict[Key, Found] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_rows": None}

    def _load(self) -> dict[Key, Found]:
        if self._rows is None:
            table = pq.read_table(
                self.ledger, columns=["sample_id", "stage", "check", "model", "context_id", "verdict", "detail"]
            )
            mask = pc.and_(
                pc.equal(table["stage"], self.stage),
                pc.is_in(table["model"], value_set=pa.array(self.models, pa.string())),
            )
            rows: dict[Key, Found] = {}
            for row in table.filter(mask).to_pylist():  # the last row of a key wins
                detail = json.loads(row["detail"] or "{}")
                rows[
                    (
                        row["check"],
                        row["model"],
                        row["sample_id"],
                        row["context_id"],
                        detail.get(self.part) if self.part else None,
                    )
                ] = (row["verdict"], detail)
            self._rows = rows
        return self._rows

    def replay(
        self,
        model: str,
        items: list[T],
        where: Callable[[T], Where],
        check: str,
        decisions: list[Decision],
        judge: str | None = None,
        regrade: Regrade | None = None,
    ) -> tuple[list[tuple[T, str]], list[T]]:
        """Split ``items`` into those ``model``'s recorded answers settle, with their verdicts
        (a ledger row appended for each), and those still to ask. ``where(item)`` is its
        (sample_id, context_id), and its ``part`` when answers are told apart by one. ``regrade`` grades recorded answer texts when ``judge``
        (this run's) is not the one that graded them, and appends their ledger rows itself."""
        if model not in self.models:
            return [], list(items)
        found: list[tuple[T, Found]] = []
        rest: list[T] = []
        for item in items:
            hit = self.lookup(check, model, where(item))
            if hit is not None:
                found.append((item, hit))
            else:
                rest.append(item)
        if judge != self.judge and regrade is not None:
            answered = [(item, detail.get("answer")) for item, (_, detail) in found]
            usable = [(item, answer) for item, answer in answered if isinstance(answer, str)]
            rest += [item for item, answer in answered if not isinstance(answer, str)]
            return list(zip([item for item, _ in usable], regrade(model, usable))), rest
        settled = []
        for item, (verdict, detail) in found:
            sample_id, context_id = where(item)[:2]
            decisions.append(
                Decision(
                    sample_id,
                    self.stage,
                    check,
                    verdict,
                    model=model,
                    context_id=context_id,
                    detail={**detail, "recorded_in": self.release},
                )
            )
            settled.append((item, verdict))
        return settled, rest

    def lookup(self, check: str, model: str, where: Where) -> Found | None:
        """``model``'s recorded (verdict, detail) for the item at ``where``, when it settles one."""
        if model not in self.models:
            return None
        hit = self._load().get(self._key(check, model, where))
        return hit if hit is not None and hit[0] in self.verdicts else None

    def _key(self, check: str, model: str, where: Where) -> Key:
        return (check, model, where[0], where[1], where[2] if len(where) > 2 else None)
