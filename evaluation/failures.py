"""The one policy for failed answer calls in an evaluation, for every benchmark, and the error
every evaluation raises when it cannot run (``EvaluationError``).

A table is a model's score only over a complete run: when some answer calls failed for good
(after the client's retries), nothing is summarised unless the user allows an incomplete
run, and then the table says so at the top and counts the failures (CRAG scoring counts
them as missing). A run in which every call failed is never summarised. Answers received
are cached, so a rerun resumes and asks only what failed.
"""

from __future__ import annotations

from mmcurate.core.errors import MmcurateError
from mmcurate.models.accounting import failed_calls


class EvaluationError(MmcurateError):
    """An evaluation asked for something the protocol does not have, or could not run."""


def check_failures(
    model: str, failed: int, total: int, first_error: str | None, allow_incomplete: bool = False
) -> str | None:
    """None for a complete run; the table's note for an allowed incomplete one; else raise."""
    if failed == 0:
        return None
    what = failed_calls(model, failed, total, first_error)
    if failed == total:
        raise EvaluationError(f"every answer call failed: {what}; nothing written")
    if not allow_incomplete:
        raise EvaluationError(
            f"{what}; nothing was summarised; rerun to resume (answers received are cached), or pass --allow-incomplete"
        )
    return f"Incomplete run: {what}."
