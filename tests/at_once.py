"""Run one function on several threads released together, for the races of shared files."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def run_at_once(work: Callable[[], Any], threads: int) -> tuple[list[Any], list[BaseException]]:
    """Start ``threads`` threads that wait at one barrier and then call ``work``; return what the
    calls returned and what they raised."""
    start = threading.Barrier(threads)
    results: list[Any] = []
    errors: list[BaseException] = []

    def call() -> None:
        start.wait()
        try:
            results.append(work())
        except BaseException as error:  # noqa: BLE001 - handed back to the test to assert on
            errors.append(error)

    workers = [threading.Thread(target=call) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return results, errors
