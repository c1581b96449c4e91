"""Response cache: SQLite in WAL mode, one row per finished model call.

The key is a sha256 over everything that can change an answer: the model's identity
(``ModelSpec.identity()`` plus backend details such as a script's hash), the full
messages (images appear as their sha256, never as bytes), the sampling parameters and
the prompt-template version. Rows are committed one by one as calls finish, so a
``kill -9`` loses at most the calls in flight, and a rerun repeats none that finished.
WAL plus a busy timeout lets several processes (Prefect workers) share one file.

Only successful answers are stored: a failure is retried on the next run. The cache
holds no secrets: API keys never enter a request, a key or a row.

Hand-written over the standard library's sqlite3 rather than a caching library (diskcache,
requests-cache): the key is ours (model identity, messages with images by digest, sampling,
template version), rows are committed one by one for ``kill -9`` safety, WAL is shared by
several worker processes, and a batch's keys are looked up a few hundred at a query (``get_many``).
Measured with ``bench/gating_throughput.py`` (docs/figures.md): a fully cached rerun
takes 0.0001 of the first run's time, and the layer with it serves 1.17 times the requests
per second of bare ``AsyncOpenAI``.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from mmcurate.core.config import ModelSpec
from mmcurate.core.errors import ConfigError

from mmcurate.models.requests import ChatRequest, sampling

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    template TEXT NOT NULL,
    text TEXT NOT NULL,
    usage TEXT NOT NULL,
    latency REAL NOT NULL,
    created REAL NOT NULL,
    top_logprobs TEXT
)
"""
_LOOKUP_CHUNK = 500  # stays under SQLite's bound-parameter limit
_BUSY_SECONDS = 60.0
_WAL_RETRY_PAUSE = 0.01


def _enter_wal(db: sqlite3.Connection, pause: Callable[[float], None] = time.sleep) -> None:
    """Switch the file to WAL, retrying while another connection is writing it.

    When several connections open a new file at once (the shards of one stage, two demo
    chains), one creates the table while another switches, and SQLite refuses the switch with
    "database is locked" at once, without waiting on the busy timeout. The switch is
    idempotent, so it is retried (after ``pause``) until the busy timeout's own deadline.
    """
    deadline = time.monotonic() + _BUSY_SECONDS
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            pause(_WAL_RETRY_PAUSE)


def cache_key(spec: ModelSpec, request: ChatRequest, extra_identity: dict[str, Any] | None = None) -> str:
    payload = {
        "model": {**spec.identity(), **(extra_identity or {})},
        "messages": request.messages,
        "sampling": sampling(spec, request),
        "template": request.template,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedAnswer:
    text: str
    usage: dict[str, Any]
    latency: float
    created: float
    top_logprobs: list[dict[str, float]] | None


class ResponseCache:
    """Thread-safe within a process (one connection behind a lock), safe across processes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # autocommit: every put is its own durable transaction
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=_BUSY_SECONDS)
        _enter_wal(self._db)
        self._db.execute("PRAGMA synchronous=NORMAL")  # durable against process crashes
        self._db.execute(_SCHEMA)

    @classmethod
    def open(cls, url: str) -> "ResponseCache":
        """Open ``sqlite:///abs/path.sqlite`` (created if missing)."""
        prefix = "sqlite:///"
        if not url.startswith(prefix):
            raise ConfigError(f"unsupported cache URL {url!r}: expected sqlite:///<absolute path>")
        return cls(Path("/" + url[len(prefix):].lstrip("/")))

    def get_many(self, keys: Iterable[str]) -> dict[str, CachedAnswer]:
        wanted = list(dict.fromkeys(keys))
        found: dict[str, CachedAnswer] = {}
        with self._lock:
            for start in range(0, len(wanted), _LOOKUP_CHUNK):
                chunk = wanted[start : start + _LOOKUP_CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT key, text, usage, latency, created, top_logprobs FROM responses WHERE key IN ({marks})",
                    chunk,
                ).fetchall()
                for key, text, usage, latency, created, top in rows:
                    found[key] = CachedAnswer(
                        text, json.loads(usage), latency, created, json.loads(top) if top else None
                    )
        return found

    def put(
        self,
        key: str,
        model: str,
        template: str,
        text: str,
        usage: dict[str, Any],
        latency: float,
        top_logprobs: list[dict[str, float]] | None = None,
    ) -> None:
        row = (
            key, model, template, text, json.dumps(usage), latency, time.time(),
            json.dumps(top_logprobs) if top_logprobs is not None else None,
        )
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)

    def count(self, model: str | None = None) -> int:
        with self._lock:
            if model is None:
                return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
            return self._db.execute("SELECT COUNT(*) FROM responses WHERE model = ?", (model,)).fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> "ResponseCache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
