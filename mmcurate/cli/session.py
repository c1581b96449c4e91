"""How the command line runs a flow: a Prefect API it owns, prompt interrupts, exit codes.

``run_flow(call)`` runs a flow inside ``tasks.prefect_api.temporary_api``. Ctrl-C (SIGINT) or
SIGTERM prints ``stopping...`` at once and asks the model layer to stop (``core.interrupt``):
pending model calls fail at once,
the flow run is recorded as crashed, the API server is stopped, and the command prints one
line and exits 130 (SIGINT) or 143 (SIGTERM). Work that cannot be interrupted (an encoder
embedding a corpus, a server starting) gets ``GRACE`` seconds; then, or at a second signal,
the command stops its API server and exits at once. Model servers stop by themselves once
the command is gone (``core.lifeline``). Finished model calls are cached: a rerun resumes.

Errors mmcurate raises on purpose (``MmcurateError``) reach the user as one line; Prefect's
console log of the failed run keeps its one-line summary but not a traceback.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from mmcurate.core.errors import MmcurateError
from mmcurate.core.interrupt import Interrupted, request_stop, wait_for_stop

T = TypeVar("T")
GRACE = 10.0  # seconds an interrupted run gets to wind down before the command exits regardless
EXIT_CODES: dict[int, int] = {signal.SIGINT: 130, signal.SIGTERM: 143}
PREFECT_RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")
STOPPING = "mmcurate: stopping... (Ctrl-C again to stop at once)"


def _expected(record: logging.LogRecord) -> bool:
    """Drop the traceback of an error raised on purpose from Prefect's run logs."""
    if record.exc_info and isinstance(record.exc_info[1], (MmcurateError, Interrupted)):
        record.exc_info, record.exc_text = None, None
    return True


class _Session:
    def __init__(self) -> None:
        self.server: Any = None  # tasks.prefect_api.ApiServer, when this command started one
        self.signum: int | None = None
        self.lock = threading.RLock()  # a second signal may arrive while exiting

    def message(self, signum: int) -> str:
        what = "interrupted (Ctrl-C)" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
        return f"mmcurate: {what}; finished model calls are cached: rerun the same command to resume"

    def exit_now(self, signum: int) -> None:
        """One line, the API server stopped, and exit: whatever other threads are doing."""
        with self.lock:
            print(self.message(signum), file=sys.stderr, flush=True)
            if self.server is not None:
                self.server.stop()
            sys.stdout.flush()
            os._exit(EXIT_CODES.get(signum, 128 + signum))

    def on_signal(self, signum: int, frame: object) -> None:
        if self.signum is not None:  # a second signal: no more waiting
            self.exit_now(self.signum)
        self.signum = signum
        print(STOPPING, file=sys.stderr, flush=True)  # winding down may take seconds: say so now
        request_stop()
        raise KeyboardInterrupt

    def watchdog(self) -> None:
        wait_for_stop()
        time.sleep(GRACE)
        self.exit_now(self.signum or signal.SIGTERM)


def run_flow(call: Callable[[], T]) -> T:
    """``call()`` (a flow run) with the API, interrupts and exit codes described above."""
    from mmcurate.tasks.prefect_api import temporary_api

    session = _Session()
    previous = {signum: signal.signal(signum, session.on_signal) for signum in EXIT_CODES}
    threading.Thread(target=session.watchdog, name="interrupt-watchdog", daemon=True).start()
    loggers = [logging.getLogger(name) for name in PREFECT_RUN_LOGGERS]
    for logger in loggers:
        logger.addFilter(_expected)
    try:
        with temporary_api() as server:
            session.server = server
            try:
                return call()
            except BaseException as exc:
                signum = session.signum or getattr(exc, "signal", None)  # Prefect's TerminationSignal
                if signum is not None or isinstance(exc, KeyboardInterrupt):
                    session.exit_now(signum or signal.SIGINT)
                raise
    finally:
        for logger in loggers:
            logger.removeFilter(_expected)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
