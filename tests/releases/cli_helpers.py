"""Run the real ``mmcurate`` entry point in-process and capture what it prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def run_cli(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    from mmcurate.cli import main

    monkeypatch.setattr(sys, "argv", ["mmcurate", *args])
    with pytest.raises(SystemExit) as exit_info:
        main()
        sys.exit(0)
    out = capsys.readouterr()
    return int(exit_info.value.code or 0), out.out, out.err


def one_line(code: int, err: str, *needles: str) -> None:
    """A usage error: exit 2 and one ``mmcurate: error:`` line holding every needle."""
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("mmcurate: error: "), err
    for needle in needles:
        assert needle in err, (needle, err)


def run_process(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    """The ``mmcurate`` console script in a child process, on the Prefect API of this session's
    harness (a command that runs a flow: Prefect's console logging is bound to the process's
    first stderr, which in-process capture would close between tests)."""
    from prefect.settings import get_current_settings

    env = {**os.environ, "PREFECT_API_URL": str(get_current_settings().api.url)}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "mmcurate"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    return done.returncode, done.stdout, done.stderr
