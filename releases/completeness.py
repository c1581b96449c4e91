"""Whether a draft may be published as a complete release.

A failed model call (or an answer the judge could not grade) keeps a sample out with
verdict ``error`` pending a rerun; published as it is, the release would present those
samples as curated away. ``check_complete`` therefore refuses a draft of a run with failed
calls or ``error`` decisions, with one line naming which model failed how often and that a
rerun resumes, unless the operator allows an incomplete release: that one records the
shortfall in its manifest and says so at the top of its card. A draft with no rows is never
published; its ledger, the only explanation of where every sample went, is written to
``<workdir>/refused/<benchmark>-<version>/ledger.parquet`` and the refusal names that file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.compute as pc

from mmcurate.core.plural import counted
from mmcurate.models.accounting import failed_calls

from .draft import ReleaseDraft
from .errors import ReleaseIncomplete
from .reader import LEDGER_FILE


@dataclass
class Shortfall:
    held_out: int  # samples with an ``error`` decision in this run
    failures: dict[str, tuple[int, int]]  # model -> (calls failed for good, calls made)
    errors: dict[str, str] = field(default_factory=dict)  # model -> the first error its failed calls recorded

    def describe(self) -> str:
        parts = [
            failed_calls(model, failed, made, self.errors.get(model))
            for model, (failed, made) in sorted(self.failures.items())
        ]
        parts.append(f"{counted(self.held_out, 'sample')} held out by errors")
        return "; ".join(parts)

    def record(self) -> dict:
        return {
            "held_out": self.held_out,
            "failed_calls": {
                m: {"failed": f, "calls": c, **({"first_error": self.errors[m]} if m in self.errors else {})}
                for m, (f, c) in sorted(self.failures.items())
            },
        }


def shortfall(draft: ReleaseDraft) -> Shortfall | None:
    """What failed in the run that made ``draft`` (its own ledger rows, not inherited ones), or None."""
    run_id = draft.counts.get("run_id")
    held: set[str] = set()
    errors: dict[str, str] = {}
    for batch in draft.ledger.batches(
        ["sample_id", "model", "verdict", "detail", "run_id"]
    ):  # streamed: it may be large
        wanted = pc.equal(batch["verdict"], "error")
        if run_id is not None:
            wanted = pc.and_(wanted, pc.equal(batch["run_id"], run_id))
        failed = batch.filter(wanted)
        held.update(failed["sample_id"].to_pylist())
        for model, detail in zip(failed["model"].to_pylist(), failed["detail"].to_pylist()):
            if model and model not in errors:
                why = _error_of(detail)
                if why:
                    errors[model] = why
    per_model: dict[str, tuple[int, int]] = {}
    for row in draft.statistics.get("calls") or []:
        if row.get("step") != "total":
            failed, made = per_model.get(row["model"], (0, 0))
            per_model[row["model"]] = (failed + row["failures"], made + row["calls"])
    failures = {model: counts for model, counts in per_model.items() if counts[0]}
    return Shortfall(len(held), failures, errors) if held or failures else None


def _error_of(detail: str | None) -> str | None:
    """The ``error`` a ledger row's detail records for a failed call, if any."""
    try:
        value = json.loads(detail or "{}")
    except ValueError:
        return None
    return value.get("error") if isinstance(value, dict) and isinstance(value.get("error"), str) else None


def refused_ledger(draft: ReleaseDraft) -> Path:
    """Write the ledger of a draft that is not published (no sample remains) into the run's
    workdir, where the refusal says it is; return the file."""
    folder = Path(draft.config["workdir"]) / "refused" / f"{draft.benchmark}-{draft.version}"
    return draft.ledger.write(folder / LEDGER_FILE)


def check_complete(draft: ReleaseDraft, allow_incomplete: bool = False) -> None:
    """Refuse a draft with no rows (its ledger written: ``refused_ledger``), or one with
    failures unless ``allow_incomplete`` (which then records the shortfall in the draft)."""
    config = draft.kind.samples_config
    short = shortfall(draft)
    name = f"{draft.benchmark} {draft.version}"
    if draft.tables[config].num_rows == 0:
        cause = (
            f"{short.describe()}; rerun the same command to resume (finished calls are cached)"
            if short
            else "every sample was removed"
        )
        ledger = refused_ledger(draft)
        raise ReleaseIncomplete(
            f"refusing to publish {name}: no sample remains: {cause}; the ledger of the run "
            f"({counted(draft.ledger.num_rows, 'decision')}) is at {ledger}"
        )
    if short is None:
        return
    if not allow_incomplete:
        raise ReleaseIncomplete(
            f"refusing to publish {name} as complete: {short.describe()}; rerun the same "
            "command to resume (finished calls are cached), or pass --allow-incomplete"
        )
    draft.incomplete = short.record()
    draft.notes.insert(0, f"Incomplete release: {short.describe()}.")
