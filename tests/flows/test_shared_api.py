"""``python -m mmcurate.tasks.shared_api COMMAND``: one temporary Prefect API for a sequence of
commands (``make demo``), real processes. The command is a small Python program that reports
the API it was given and whether that API answers, and exits with a chosen code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow
# writes {"url": PREFECT_API_URL, "health": status or null} to argv[1], then exits 3
PROBE = (
    "import json, os, sys, httpx\n"
    "url = os.environ.get('PREFECT_API_URL')\n"
    "try:\n"
    "    health = httpx.get(url + '/health', timeout=10).status_code if url else None\n"
    "except httpx.TransportError:\n"
    "    health = None\n"
    "open(sys.argv[1], 'w').write(json.dumps({'url': url, 'health': health}))\n"
    "sys.exit(3)\n"
)


def _environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    return {
        **env,
        "TMPDIR": str(tmp_path / "tmp"),
        "PREFECT_HOME": str(tmp_path / "prefect"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        **extra,
    }


def test_the_command_runs_against_one_api_that_stops_after_it(tmp_path):
    seen = tmp_path / "seen.json"
    done = subprocess.run(
        [sys.executable, "-m", "mmcurate.tasks.shared_api", sys.executable, "-c", PROBE, str(seen)],
        env=_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 3, done.stderr[-3000:]  # the command's own exit code
    report = json.loads(seen.read_text())
    assert report["health"] == 200  # the API answered while the command ran
    with pytest.raises(httpx.TransportError):  # and is gone once it ended
        httpx.get(report["url"] + "/health", timeout=5)
    assert list((tmp_path / "tmp" / f"mmcurate-{os.getuid()}").glob("prefect-api-*")) == []  # nothing left registered


def test_a_configured_api_is_used_and_nothing_is_started(tmp_path):
    seen = tmp_path / "seen.json"
    given = "http://127.0.0.1:9/api"  # nothing listens there: the command is told it, no server starts
    done = subprocess.run(
        [sys.executable, "-m", "mmcurate.tasks.shared_api", sys.executable, "-c", PROBE, str(seen)],
        env=_environment(tmp_path, PREFECT_API_URL=given),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 3, done.stderr[-3000:]
    assert json.loads(seen.read_text()) == {"url": given, "health": None}
    assert not (tmp_path / "tmp" / f"mmcurate-{os.getuid()}").exists()  # no server was ever registered
