"""Response cache: SQLite in WAL mode, one row per finished model call (``PartsCache``, at the
end, is its form for workers that share no disk: ``cache_url: parts+<URL>``).

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

import atexit
import hashlib
import io
import itertools
import json
import os
import re
import secrets
import shutil
import socket
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from mmcurate.core.config import ModelSpec, cache_location
from mmcurate.core.errors import MmcurateError
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


Row = tuple[str, str, str, str, str, float, float, str | None]  # the columns of ``responses``, in order


def _row(
    key: str,
    model: str,
    template: str,
    text: str,
    usage: dict[str, Any],
    latency: float,
    top_logprobs: list[dict[str, float]] | None,
) -> Row:
    return (
        key,
        model,
        template,
        text,
        json.dumps(usage),
        latency,
        time.time(),
        json.dumps(top_logprobs) if top_logprobs is not None else None,
    )


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

    @staticmethod
    def open(url: str) -> ResponseCache:
        """Open the cache ``url`` names (``core.config.cache_location``): ``sqlite:///abs/path.sqlite``
        (created if missing) or ``parts+<URL>`` (a ``PartsCache``)."""
        kind, where = cache_location(url)
        return ResponseCache(Path(where)) if kind == "sqlite" else PartsCache(where)

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
        self._store(_row(key, model, template, text, usage, latency, top_logprobs))

    def _store(self, row: Row) -> None:
        """Keeps one answer's row (``_row``): here, in the SQLite table."""
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

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_COLUMNS = ("key", "model", "template", "text", "usage", "latency", "created", "top_logprobs")
_PART_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("model", pa.string()),
        ("template", pa.string()),
        ("text", pa.string()),
        ("usage", pa.string()),
        ("latency", pa.float64()),
        ("created", pa.float64()),
        ("top_logprobs", pa.string()),
    ]
)
# Among parts, one row per key: the earliest answer (then the smallest text), whatever order the
# parts are read in, so every worker, and the compacted cache, answers a key alike.
_MERGE = (
    "INSERT INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET "
    "model = excluded.model, template = excluded.template, text = excluded.text, usage = excluded.usage, "
    "latency = excluded.latency, created = excluded.created, top_logprobs = excluded.top_logprobs "
    "WHERE (excluded.created, excluded.text) < (responses.created, responses.text)"
)


@dataclass
class _Merged:
    """This process's merged view of the parts under one URL: a local SQLite file, and the
    markers already read into it (shared by every ``PartsCache`` the process opens there)."""

    path: Path
    seen: set[str]
    lock: threading.Lock


_MERGED: dict[str, _Merged] = {}
_MERGED_LOCK = threading.Lock()


def _merged(url: str) -> _Merged:
    with _MERGED_LOCK:
        if url not in _MERGED:
            folder = Path(tempfile.mkdtemp(prefix="mmcurate-cache-"))
            atexit.register(shutil.rmtree, folder, True)
            _MERGED[url] = _Merged(folder / "merged.sqlite", set(), threading.Lock())
        return _MERGED[url]


class _Parts:
    """The layout of a parts cache under an fsspec URL: ``parts/<name>.parquet`` holds rows,
    ``markers/<name>.json`` (written last, naming the part, its row count and sha256) publishes
    them. A reader trusts only parts a marker names, so a part torn by ``kill -9`` is never read."""

    def __init__(self, url: str) -> None:
        self.fs, self.root = fsspec.core.url_to_fs(url)
        self.url = url
        for folder in ("parts", "markers"):
            self.fs.makedirs(self._path(folder, ""), exist_ok=True)

    def _path(self, folder: str, name: str) -> str:
        return f"{self.root.rstrip('/')}/{folder}/{name}"

    def markers(self) -> list[str]:
        """The names of the published parts, sorted."""
        folder = self._path("markers", "")
        self.fs.invalidate_cache(folder.rstrip("/"))
        try:
            listed = self.fs.ls(folder, detail=False)
        except FileNotFoundError:
            return []
        return sorted(name.rsplit("/", 1)[-1].removesuffix(".json") for name in listed if name.endswith(".json"))

    def publish(self, name: str, rows: list[Row]) -> None:
        table = pa.table({column: [row[i] for row in rows] for i, column in enumerate(_COLUMNS)}, schema=_PART_SCHEMA)
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        data = buffer.getvalue()
        self.fs.pipe_file(self._path("parts", f"{name}.parquet"), data)
        marker = {"part": f"{name}.parquet", "rows": len(rows), "sha256": hashlib.sha256(data).hexdigest()}
        self.fs.pipe_file(self._path("markers", f"{name}.json"), json.dumps(marker).encode("utf-8"))

    def read(self, names: list[str]) -> dict[str, pa.Table]:
        """The rows of each published part of ``names``, fetched together (concurrently from an
        object store); left out, to be looked at again later: a part whose marker is still being
        written (or was torn by a kill), and one compaction removed meanwhile."""
        markers = self._cat({name: self._path("markers", f"{name}.json") for name in names})
        wanted: dict[str, tuple[str, str]] = {}
        for name, raw in markers.items():
            try:
                marker = json.loads(raw)
                wanted[name] = (marker["part"], marker["sha256"])
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
        data = self._cat({name: self._path("parts", part) for name, (part, _) in wanted.items()})
        tables: dict[str, pa.Table] = {}
        for name, content in data.items():
            part, sha256 = wanted[name]
            if hashlib.sha256(content).hexdigest() != sha256:
                raise MmcurateError(f"response cache {self.url}: part {part} does not match its marker")
            tables[name] = pq.read_table(io.BytesIO(content), schema=_PART_SCHEMA)
        return tables

    def _cat(self, paths: dict[str, str]) -> dict[str, bytes]:
        """The bytes at each of ``paths`` (by its name) that exists."""
        if not paths:
            return {}
        found = self.fs.cat(list(paths.values()), on_error="omit")
        by_path = {self.fs._strip_protocol(path): content for path, content in found.items()}
        return {name: by_path[key] for name, path in paths.items() if (key := self.fs._strip_protocol(path)) in by_path}

    def remove(self, names: list[str]) -> None:
        """Unpublish ``names`` (markers first, so no reader trusts a part being removed), then delete the parts."""
        for folder, suffix in (("markers", ".json"), ("parts", ".parquet")):
            self.fs.rm([self._path(folder, f"{name}{suffix}") for name in names])


def _writer() -> str:
    """A name no other writer takes: host, process and a random suffix."""
    host = re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname()) or "host"
    return f"{host}-{os.getpid()}-{secrets.token_hex(4)}"


class PartsCache(ResponseCache):
    """The response cache of workers that share no disk (``cache_url: parts+<URL>``).

    Each finished call is published as its own part (``_Parts``) before ``put`` returns, so a
    ``kill -9`` loses at most the calls in flight, as with SQLite's row-by-row commits; no
    worker ever writes another's part. Lookups read this process's merged copy of every
    published part (``_Merged``), first refreshed when a key is missing from it, so a worker
    sees the calls other workers finished. ``compact_parts`` merges the parts into one.
    """

    def __init__(self, url: str) -> None:
        self.parts = _Parts(url)
        self._merged = _merged(url)
        super().__init__(self._merged.path)
        self._name = _writer()
        self._written = itertools.count()
        self.refresh()

    def refresh(self) -> None:
        """Read into the merged copy every part published since the last refresh."""
        with self._merged.lock:
            tables = self.parts.read([name for name in self.parts.markers() if name not in self._merged.seen])
            with self._lock:
                self._db.execute("BEGIN")
                for table in tables.values():
                    self._db.executemany(_MERGE, zip(*(table.column(column).to_pylist() for column in _COLUMNS)))
                self._db.execute("COMMIT")
            self._merged.seen.update(tables)

    def get_many(self, keys: Iterable[str]) -> dict[str, CachedAnswer]:
        wanted = list(dict.fromkeys(keys))
        found = super().get_many(wanted)
        if len(found) < len(wanted):
            self.refresh()
            found.update(super().get_many([key for key in wanted if key not in found]))
        return found

    def _store(self, row: Row) -> None:
        """Publishes the row as a part of its own, then merges it into the local table."""
        name = f"{self._name}-{next(self._written):08d}"
        self.parts.publish(name, [row])
        with self._merged.lock:
            with self._lock:
                self._db.execute(_MERGE, row)
            self._merged.seen.add(name)

    def count(self, model: str | None = None) -> int:
        self.refresh()
        return super().count(model)


@dataclass(frozen=True)
class Compaction:
    parts: int  # published parts merged
    rows: int  # rows they held
    kept: int  # rows in the one part left: one per key


def compact_parts(url: str) -> Compaction:
    """Merge the published parts under ``url`` (a ``parts+`` cache without the prefix) into one,
    keeping one row per key, the one lookups answer (``_MERGE``). The merged part is published
    before any merged one is removed, so readers meanwhile find every key; parts published
    while it runs (or whose marker is still being written) are left as they are."""
    parts = _Parts(url)
    read = parts.read(parts.markers())
    names, tables = list(read), list(read.values())
    rows = sum(table.num_rows for table in tables)
    if len(names) <= 1:
        return Compaction(len(names), rows, rows)
    merged = (
        pl.DataFrame(pa.concat_tables(tables))
        .sort(["key", "created", "text"])
        .unique("key", keep="first", maintain_order=True)
    )
    parts.publish(f"compact-{_writer()}", list(merged.iter_rows()))
    parts.remove(names)
    return Compaction(len(names), rows, merged.height)
