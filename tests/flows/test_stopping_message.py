"""Ctrl-C says ``stopping...`` the moment it arrives, then the one closing line; a second
Ctrl-C stops at once (issue 22, item 12). The signal handler is called directly: no timing."""

from __future__ import annotations

import signal

import pytest

import mmcurate.cli.session as session


class Exited(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


def test_first_ctrl_c_says_stopping_at_once_and_a_second_one_forces(capsys, monkeypatch):
    monkeypatch.setattr(session, "request_stop", lambda: None)  # the real one would stop this test process's models
    monkeypatch.setattr(session.os, "_exit", lambda code: (_ for _ in ()).throw(Exited(code)))
    state = session._Session()
    with pytest.raises(KeyboardInterrupt):
        state.on_signal(signal.SIGINT, None)
    assert capsys.readouterr().err == session.STOPPING + "\n"
    with pytest.raises(Exited) as exited:
        state.on_signal(signal.SIGINT, None)
    assert exited.value.code == 130
    err = capsys.readouterr().err
    assert err.startswith("mmcurate: interrupted (Ctrl-C); finished model calls are cached") and err.count("\n") == 1
