"""The decision ledger: filters never delete, they append one row per decision.

A release is a view over samples + ledger, so any sample's fate can be traced
(``mmcurate why``). Verdicts are short words (``keep``, ``drop``, a judge grade, ...);
``detail`` is a JSON object with whatever explains the verdict.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from .schema import LEDGER


@dataclass(frozen=True)
class Decision:
    sample_id: str
    stage: str
    check: str
    verdict: str
    model: str | None = None
    context_id: str | None = None
    detail: dict[str, Any] | None = None

    def to_row(self, run_id: str) -> dict[str, Any]:
        return {
            "sample_id": self.sample_id,
            "stage": self.stage,
            "check": self.check,
            "model": self.model,
            "context_id": self.context_id,
            "verdict": self.verdict,
            "detail": json.dumps(self.detail or {}, ensure_ascii=False, sort_keys=True),
            "run_id": run_id,
        }


def ledger_table(decisions: list[Decision], run_id: str) -> pa.Table:
    return pa.Table.from_pylist([d.to_row(run_id) for d in decisions], schema=LEDGER)


def empty_ledger() -> pa.Table:
    return LEDGER.empty_table()
