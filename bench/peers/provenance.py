"""When, where and on what load a peer bench ran: the line each ``bench/peers`` script prints
first and last, so a figure copied into the README carries its date, commit and load."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"
if str(BENCH) not in sys.path:  # the scripts of bench/ (gating_throughput, kb_scale) are imported by name
    sys.path.insert(0, str(BENCH))


def commit() -> str:
    """The checkout's short commit, ``+dirty`` when it has uncommitted changes."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False
        ).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def load() -> str:
    """The 1-, 5- and 15-minute load averages, ``0.52 0.61 0.70``."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def stamp(label: str) -> str:
    """``label: <UTC time>, commit <sha>, load <1/5/15-minute averages> on <n> cores``."""
    one, five, fifteen = os.getloadavg()
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"{label}: {when}, commit {commit()}, load {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores"
