"""Many connections open one new response cache at once (the shards of a stage, two demo chains).

SQLite refuses the switch to WAL with "database is locked", without waiting on the busy
timeout, while another connection is writing the file (here: creating the table); CI saw it
once in test_reflectv_flow. Every opener must get a working cache.
"""

from __future__ import annotations

import sqlite3
from functools import partial
from pathlib import Path

import pytest

from mmcurate.models import cache as cache_module
from mmcurate.models.cache import ResponseCache, _enter_wal
from tests.at_once import run_at_once

OPENERS = 8
FRESH_FILES = 200  # with 4 openers the old code failed on 44 of 300 new files


def _open_and_get(path: Path) -> dict:
    return ResponseCache(path).get_many(["absent"])


def test_connections_opening_one_new_file_at_once_all_succeed(tmp_path: Path) -> None:
    for index in range(FRESH_FILES):
        path = tmp_path / f"responses-{index}.sqlite"
        found, errors = run_at_once(partial(_open_and_get, path), threads=OPENERS)
        assert errors == [] and found == [{}] * OPENERS, path
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _held_write(path: Path) -> sqlite3.Connection:
    """A connection holding an open write on ``path`` (rollback journal): SQLite refuses another
    connection's switch to WAL at once, without its busy timeout."""
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("CREATE TABLE held (k)")
    writer.execute("BEGIN")
    writer.execute("INSERT INTO held VALUES (1)")
    return writer


def test_the_switch_to_wal_waits_out_a_write_it_was_refused_for(tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite"
    writer = _held_write(path)
    opener = sqlite3.connect(path, isolation_level=None, timeout=60)
    pauses: list[float] = []

    def pause(seconds: float) -> None:  # the writer finishes while the opener waits
        pauses.append(seconds)
        writer.execute("COMMIT")

    _enter_wal(opener, pause)
    assert len(pauses) == 1
    assert opener.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_lock_held_past_the_busy_timeout_is_still_an_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(cache_module, "_BUSY_SECONDS", 0.0)
    path = tmp_path / "responses.sqlite"
    writer = _held_write(path)
    opener = sqlite3.connect(path, isolation_level=None, timeout=60)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        _enter_wal(opener, lambda seconds: None)
    writer.execute("ROLLBACK")
