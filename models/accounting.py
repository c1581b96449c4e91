"""Call accounting per (stage, model): calls made to the backend, cache hits, failures, and
the tokens the calls used.

``calls`` counts requests that reached a backend (cache misses); ``cache_hits`` counts
requests answered from the cache, an identical request of the same batch included (it is sent
once), so ``calls + cache_hits`` is the number of requests answered, on a first run as on a
rerun; ``failures`` counts calls that failed for good (after retries); a request identical to
a failed one is neither. A fully cached rerun therefore shows ``calls == 0``. ``prompt_tokens`` and
``completion_tokens`` add up the usage the backends reported for their calls (cache hits
cost nothing), over the ``usage_calls`` calls that reported any (the scripted backend
reports none).
"""

from __future__ import annotations

import threading
from collections import defaultdict

from mmcurate.core.plural import counted

COUNTS = ("calls", "cache_hits", "failures", "usage_calls", "prompt_tokens", "completion_tokens")


class CallCounter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: dict.fromkeys(COUNTS, 0))

    def record(self, stage: str, model: str, cached: bool, failed: bool, usage: dict | None = None) -> None:
        with self._lock:
            row = self._counts[(stage, model)]
            if cached:
                row["cache_hits"] += 1
                return
            row["calls"] += 1
            row["failures"] += int(failed)
            if usage and ("prompt_tokens" in usage or "completion_tokens" in usage):
                row["usage_calls"] += 1
                row["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
                row["completion_tokens"] += int(usage.get("completion_tokens") or 0)

    def rows(self) -> list[dict]:
        with self._lock:
            return [
                {"stage": stage, "model": model, **counts} for (stage, model), counts in sorted(self._counts.items())
            ]

    @property
    def totals(self) -> dict[str, int]:
        """Calls, cache hits and failures over every stage and model."""
        total = dict.fromkeys(COUNTS[:3], 0)
        for row in self.rows():
            for name in total:
                total[name] += row[name]
        return total


def failed_calls(model: str, failed: int, calls: int, first_error: str | None) -> str:
    """How every command says that a model's calls failed, and why (the first error's first
    line): ``model 'x' failed 3 of 4 calls (first error: Connection error.)``."""
    why = (first_error or "").strip().splitlines()
    reason = f" (first error: {why[0][:200]})" if why else ""
    return f"model {model!r} failed {failed} of {counted(calls, 'call')}{reason}"
