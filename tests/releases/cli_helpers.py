"""Run the real ``mmcurate`` entry point in-process and capture what it prints."""
from __future__ import annotations

import sys

import pytest


def run_cli(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    from mmcurate.cli import main

    monkeypatch.setattr(sys, "argv", ["mmcurate", *args])
    with pytest.raises(SystemExit) as exit_info:
        main()
        sys.exit(0)
    out = capsys.readouterr()
    return int(exit_info.value.code or 0), out.out, out.err
