"""``StageResult``: what every curation stage returns, DeflectionBench and RefLVQA alike.

A stage keeps a subset of its input rows (possibly annotated) and says why in ledger
decisions. The remaining fields are filled by the stages they apply to: ``counts``,
``skipped``/``reason`` and ``extra`` by the RefLVQA stages; ``convergence``, ``naive_calls``
and ``requests`` by the DeflectionBench model stages.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from mmcurate.core.ledger import Decision, ledger_table


@dataclass(kw_only=True)
class StageResult:
    """The rows a stage keeps and why, as ledger decisions."""

    stage: str
    kept: pa.Table  # subset of the input samples, possibly annotated or with pruned negatives
    decisions: list[Decision]
    run_id: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    skipped: bool = False  # the stage did not filter (e.g. no encoder configured); ``reason`` says why
    reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    convergence: list[dict] = field(default_factory=list)  # {n_models, model, retained}
    naive_calls: int = 0  # calls without early elimination: every model on every item
    requests: int = 0  # requests actually issued (cache hits included)

    def ledger(self, run_id: str | None = None) -> pa.Table:
        """The decisions as LEDGER rows (``run_id`` defaults to the stage's own)."""
        return ledger_table(self.decisions, run_id if run_id is not None else self.run_id)

    def verdicts(self, check: str) -> dict[str, str]:
        """sample_id -> verdict of the rows with this check and no model (sample-level)."""
        return {d.sample_id: d.verdict for d in self.decisions if d.check == check and d.model is None}

    def summary(self) -> dict[str, Any]:
        """A JSON-able line for manifests and reports."""
        return {"stage": self.stage, "counts": dict(self.counts), "skipped": self.skipped, "reason": self.reason}
