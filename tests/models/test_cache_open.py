"""Many connections open one new response cache at once (the shards of a stage, two demo chains).

SQLite may refuse the switch to WAL with "database is locked" without waiting on the busy
timeout when another connection is switching the same new file; CI saw it once in
test_reflectv_flow. Every opener must get a working cache.
"""
from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from mmcurate.models.cache import ResponseCache

OPENERS = 8
FRESH_FILES = 60  # with 4 openers the old code failed on 44 of 300 new files


def _open_together(path: Path) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(OPENERS)

    def open_one() -> None:
        start.wait()
        try:
            cache = ResponseCache(path)
            cache.get_many(["absent"])
        except BaseException as error:  # noqa: BLE001 - collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=open_one) for _ in range(OPENERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_connections_opening_one_new_file_at_once_all_succeed(tmp_path: Path) -> None:
    for index in range(FRESH_FILES):
        path = tmp_path / f"responses-{index}.sqlite"
        assert _open_together(path) == [], path
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
