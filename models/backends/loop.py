"""A private asyncio loop on a daemon thread, so sync callers (Prefect threads, CLIs,
notebooks that already run a loop) can drive async HTTP clients and keep their
connection pools alive between batches. A waiting caller notices an interrupted run
(``core.interrupt``) and cancels what is in flight."""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Coroutine, TypeVar

from mmcurate.core.interrupt import raise_if_stopped, stop_requested

T = TypeVar("T")
POLL = 0.25  # seconds between looks at the stop flag while waiting


class LoopThread:
    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for its result (re-raising its exception); when the
        run is interrupted, cancel it and raise ``Interrupted``."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        while True:
            try:
                return future.result(timeout=POLL)
            except concurrent.futures.TimeoutError:
                if stop_requested():
                    future.cancel()
                    raise_if_stopped()

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()
