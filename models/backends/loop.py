"""An event loop on a thread of its own (anyio's blocking portal), so sync callers (Prefect
threads, CLIs, notebooks that already run a loop) can drive async HTTP clients and keep their
connection pools alive between batches. A waiting caller notices an interrupted run
(``core.interrupt``) and cancels what is in flight."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from anyio.from_thread import start_blocking_portal

from mmcurate.core.interrupt import raise_if_stopped, stop_requested

T = TypeVar("T")
POLL = 0.25  # seconds between looks at the stop flag while waiting


class LoopThread:
    def __init__(self) -> None:
        self._portal_context = start_blocking_portal("asyncio")
        self._portal = self._portal_context.__enter__()
        self._stopped = False

    def run(self, function: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``function(*args)`` on the loop and wait for its result (re-raising its exception);
        when the run is interrupted, cancel it and raise ``Interrupted``."""
        future = self._portal.start_task_soon(function, *args)
        while True:
            try:
                return future.result(timeout=POLL)
            except concurrent.futures.TimeoutError:
                if stop_requested():
                    future.cancel()
                    raise_if_stopped()

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self._portal_context.__exit__(None, None, None)
