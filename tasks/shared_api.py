"""One temporary Prefect API for a whole sequence of commands (``make demo``'s steps).

Every ``mmcurate`` command that runs a flow starts its own temporary API (``prefect_api``)
unless ``PREFECT_API_URL`` names one: for the demo's dozen flow commands that is a dozen
server starts (seconds of CPU each). ``python -m mmcurate.tasks.shared_api COMMAND ...``
starts one (``temporary_api``: its own session, stopped when this process ends or dies),
runs COMMAND with ``PREFECT_API_URL`` naming it, stops it and exits with COMMAND's code.
With ``PREFECT_API_URL`` already set, COMMAND runs against that API and nothing is started.

Ctrl-C reaches COMMAND's processes (the terminal's process group); this process ignores it
and waits for them, so their flows record how they ended before the API stops.
"""

from __future__ import annotations

import signal
import subprocess
import sys

from mmcurate.tasks.prefect_api import temporary_api


def run_with_api(command: list[str]) -> int:
    """``command``'s exit code, run with one temporary Prefect API (module docstring)."""
    with temporary_api():
        process = subprocess.Popen(command)  # started first: it must not inherit the ignored SIGINT
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            return process.wait()
        finally:
            signal.signal(signal.SIGINT, previous)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python -m mmcurate.tasks.shared_api COMMAND [ARG ...]")
    sys.exit(run_with_api(sys.argv[1:]))
