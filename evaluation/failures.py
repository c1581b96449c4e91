"""The one policy for failed answer calls in an evaluation, for every benchmark.

A table is a model's score only over a complete run: when some answer calls failed for good
(after the client's retries), nothing is summarised unless the user allows an incomplete
run, and then the table says so at the top and counts the failures (CRAG scoring counts
them as missing). A run in which every call failed is never summarised. Answers received
are cached, so a rerun resumes and asks only what failed.
"""
from __future__ import annotations

from .scenarios import EvaluationError


def check_failures(model: str, failed: int, total: int, first_error: str | None,
                   allow_incomplete: bool = False) -> str | None:
    """None for a complete run; the table's note for an allowed incomplete one; else raise."""
    if failed == 0:
        return None
    if failed == total:
        raise EvaluationError(f"all {total} answer calls to model {model!r} failed; nothing written. "
                              f"First error: {first_error}")
    if not allow_incomplete:
        raise EvaluationError(f"{failed} of {total} answer calls to model {model!r} failed (first: {first_error}); "
                              "nothing was summarised; rerun to resume (answers received are cached), or pass "
                              "--allow-incomplete")
    return f"Incomplete run: {failed} of {total} answer calls to {model} failed for good (first: {first_error})."
