"""Call accounting per (stage, model): calls made to the backend, cache hits, failures.

``calls`` counts requests that reached a backend (cache misses); ``cache_hits`` counts
requests answered from the cache; ``failures`` counts calls that failed for good
(after retries). A fully cached rerun therefore shows ``calls == 0``.
"""
from __future__ import annotations

import threading
from collections import defaultdict


class CallCounter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], dict[str, int]] = defaultdict(
            lambda: {"calls": 0, "cache_hits": 0, "failures": 0}
        )

    def record(self, stage: str, model: str, cached: bool, failed: bool) -> None:
        with self._lock:
            row = self._counts[(stage, model)]
            if cached:
                row["cache_hits"] += 1
            else:
                row["calls"] += 1
                row["failures"] += int(failed)

    def rows(self) -> list[dict]:
        with self._lock:
            return [
                {"stage": stage, "model": model, **counts}
                for (stage, model), counts in sorted(self._counts.items())
            ]

    @property
    def totals(self) -> dict[str, int]:
        total = {"calls": 0, "cache_hits": 0, "failures": 0}
        for row in self.rows():
            for name in total:
                total[name] += row[name]
        return total
