"""Stopping a run promptly when it is interrupted (Ctrl-C, SIGTERM).

The command line calls ``request_stop()`` when a signal arrives; the model layer then fails
every pending call fast (``raise_if_stopped`` at each batch, and in-flight HTTP requests are
cancelled), so the threads that run shards finish within moments instead of after their
whole batch. Finished calls are already in the response cache: a rerun resumes.
"""

from __future__ import annotations

import threading

_STOP = threading.Event()


class Interrupted(Exception):
    """Raised in the model layer once a stop was requested."""


def request_stop() -> None:
    _STOP.set()


def stop_requested() -> bool:
    return _STOP.is_set()


def wait_for_stop() -> None:
    """Block until a stop is requested."""
    _STOP.wait()


def raise_if_stopped() -> None:
    if _STOP.is_set():
        raise Interrupted("the run was interrupted")
