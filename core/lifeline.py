"""Child processes that do not outlive the process that started them.

A helper server (the llama.cpp model server, the temporary Prefect API) is started with
``MMCURATE_PARENT_PID`` in its environment and calls ``exit_with_parent()`` first thing: a
daemon thread watches its parent, and once the parent is gone (however it died, SIGKILL
included) the child sends itself SIGTERM, which its server shuts down on, and exits for good
if that shutdown hangs.
"""

from __future__ import annotations

import os
import signal
import threading
import time

PARENT_ENV = "MMCURATE_PARENT_PID"
WATCH_INTERVAL = 0.5  # seconds between looks at the parent
SHUTDOWN_GRACE = 10.0  # seconds a server gets to stop after SIGTERM


def child_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child that should stop with this process."""
    return {**(os.environ if environ is None else environ), PARENT_ENV: str(os.getpid())}


def exit_with_parent() -> None:
    """Stop this process once the parent named in ``MMCURATE_PARENT_PID`` is no longer its parent
    (nothing happens when the variable is absent: the process was started by hand)."""
    value = os.environ.get(PARENT_ENV)
    if not value:
        return
    parent = int(value)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_INTERVAL)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(SHUTDOWN_GRACE)
        os._exit(1)

    threading.Thread(target=watch, name="lifeline", daemon=True).start()
