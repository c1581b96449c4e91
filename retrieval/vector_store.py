"""An on-disk, sharded store of a knowledge base's records and their vectors, built resumably.

A store folder holds:

    store.json               identity: encoder name, dimension, dtype, source, records per shard
    records/00000.parquet    shard 0's records ``{doc_id, title, text}`` (row groups of 1,000)
    records/00000.json       its marker: rows, and ``next``, the source documents consumed so far
    records/complete.json    written once the whole source is in shards (shards, rows)
    vectors/00000.npy        shard 0's vectors, float32 ``[rows, dim]``, L2-normalised
    vectors/00000.json       its marker: rows, encoder

Every file is written under a temporary name and renamed into place, and a shard's marker is
written (the same way) only after its data file: a shard without its marker is unfinished and
is redone from its start, so a killed run resumes at the last finished shard and a half-written
shard is never read as complete. Vectors are float32 (exact re-scoring needs no second copy;
6M x 768 is 18 GB on disk). Whole shards are streamed through a memory mapping, one shard at a
time (``chunks``); the scattered rows a search re-scores are read one by one (``gather``).

A store belongs to one encoder: opening it with another encoder name or dimension is refused
(``rebuild=True`` drops its vectors and keeps its records), so vectors of two encoders are never
mixed. Shards are independent once their records exist: ``embed_shard`` embeds one (the unit a
task runner fans out, see ``tasks/kb_store.py``) and ``embed_store`` embeds the rest in order,
printing progress and an ETA. Record ingest is one streamed pass over the source (it resumes
after its last finished shard by skipping the documents that shard's marker says were consumed).

The ``.npy`` format (a header then the raw C-order array) is NumPy's own
(numpy.org/doc/stable/reference/generated/numpy.lib.format.html); ``open_memmap`` writes a
shard batch by batch without holding it in memory.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mmcurate.core.errors import MmcurateError

from .kb import page_text

FORMAT = 1
SHARD_ROWS = 100_000  # 300 MB of float32 vectors at 768-d: one shard in memory at most
CHUNK_ROWS = 50_000  # rows copied into memory at a time when the whole store is streamed
ROW_GROUP = 1_000  # records are read back a row group at a time (the pages a search returned)
BATCH = 256  # records per encoder call
GATHER_THREADS = 8  # concurrent reads of scattered rows (see VectorStore.gather)
RECORDS = pa.schema([("doc_id", pa.string()), ("title", pa.string()), ("text", pa.string())])

NOWAIT = getattr(os, "RWF_NOWAIT", None)  # Linux: a read the page cache cannot serve fails at once

Read = tuple[int, int, int]  # (file descriptor, byte offset in the file, byte offset in the result)


def read_cached(reads: list[Read], into: memoryview, row_bytes: int) -> list[Read]:
    """Do each read the page cache can serve now (``RWF_NOWAIT``); the reads that missed (all of
    them where the flag is unknown or the file system refuses it), to be read blocking. On
    Linux a missed read has started its pages' I/O, so the blocking reads find them under way."""
    if NOWAIT is None:
        return reads
    missed: list[Read] = []
    for number, (fd, start, at) in enumerate(reads):
        try:
            done = os.preadv(fd, [into[at : at + row_bytes]], start, NOWAIT)
        except BlockingIOError:
            done = -1
        except OSError:  # EOPNOTSUPP (a file system without non-blocking reads): read the rest blocking
            return missed + reads[number:]
        if done != row_bytes:  # not cached, or partly: read again whole
            missed.append((fd, start, at))
    return missed


Encode = Callable[[list[str]], np.ndarray]
Progress = Callable[[str], None]


def to_stderr(line: str) -> None:
    """The default ``Progress``: a line on stderr, so a command's stdout holds its result alone.
    ``print`` is looked up when called, not bound as a default at import: inside a Prefect run
    with ``log_prints`` the line goes to the run's log (which Prefect shows on stderr)."""
    print(line, file=sys.stderr, flush=True)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise MmcurateError(f"vector store file {path} is unreadable: {exc}") from None


@dataclass(frozen=True)
class Shard:
    number: int
    offset: int  # global row of its first record
    rows: int


class VectorStore:
    """A store folder (module docstring): its identity, its shards, and row-level reads."""

    def __init__(self, root: Path, meta: dict[str, Any]) -> None:
        self.root = Path(root)
        self.meta = meta

    @property
    def dim(self) -> int:
        return int(self.meta["dim"])

    @property
    def encoder(self) -> str:
        return str(self.meta["encoder"])

    @property
    def shard_rows(self) -> int:
        return int(self.meta["shard_rows"])

    def records_path(self, number: int) -> Path:
        return self.root / "records" / f"{number:05d}.parquet"

    def vectors_path(self, number: int) -> Path:
        return self.root / "vectors" / f"{number:05d}.npy"

    def records_complete(self) -> bool:
        return (self.root / "records" / "complete.json").is_file()

    def record_shards(self) -> list[Shard]:
        """The finished record shards, in order (each marked, with no gap)."""
        shards: list[Shard] = []
        offset = 0
        while (marker := _read_json(self.records_path(len(shards)).with_suffix(".json"))) is not None:
            shards.append(Shard(len(shards), offset, int(marker["rows"])))
            offset += int(marker["rows"])
        return shards

    def embedded(self, number: int) -> bool:
        marker = _read_json(self.vectors_path(number).with_suffix(".json"))
        return marker is not None and marker["encoder"] == self.encoder

    def pending(self) -> list[Shard]:
        """Record shards whose vectors are not finished yet."""
        return [s for s in self.record_shards() if not self.embedded(s.number)]

    def complete(self) -> bool:
        return self.records_complete() and not self.pending()

    def __len__(self) -> int:
        return sum(s.rows for s in self.record_shards())

    def vectors(self, number: int) -> np.ndarray:
        """Shard ``number``'s vectors, memory-mapped read-only (drop the array to unmap it)."""
        if not self.embedded(number):
            raise MmcurateError(f"shard {number} of the vector store at {self.root} is not embedded yet")
        return np.load(self.vectors_path(number), mmap_mode="r")

    def chunks(self, size: int = CHUNK_ROWS) -> Iterator[tuple[int, np.ndarray]]:
        """(global row of the first, rows as an in-memory float32 copy) over the whole store, in
        order; one shard is mapped at a time, so resident memory stays near ``size`` rows."""
        self._require_complete()
        for shard in self.record_shards():
            mapped = self.vectors(shard.number)
            for start in range(0, shard.rows, size):
                yield shard.offset + start, np.array(mapped[start : start + size], dtype=np.float32)
            del mapped

    def gather(self, rows: np.ndarray) -> np.ndarray:
        """The vectors at global ``rows`` (any order, repeats allowed), read from the shards.

        Scattered rows are read with ``os.preadv`` straight into the result, not through a
        mapping: a page fault on a mapped file reads ahead about 128 KB around each 3 KB row, and
        one thread faults one page at a time (on the 6M x 768 store, 750 rows/s mapped against
        6,800 rows/s with one reading thread and 26,000 with eight). Every row is first read in
        this thread with ``RWF_NOWAIT`` (Linux): what the page cache holds is copied at once, and
        a row it lacks fails without waiting but has its pages' reads started, so the
        ``GATHER_THREADS`` threads that then read the missed rows wait on I/O already under way
        rather than issue it 8 at a time (``bench/store_gather.py``).
        Nothing stays mapped, so a search's resident memory is its candidates, not the store."""
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty((len(rows), self.dim), dtype=np.float32)
        if not len(rows):
            return out
        shards = self.record_shards()
        offsets = np.array([s.offset for s in shards], dtype=np.int64)
        owner = np.searchsorted(offsets, rows, side="right") - 1
        if rows.min() < 0 or rows.max() >= offsets[-1] + shards[-1].rows:
            raise MmcurateError(f"row out of range of the vector store at {self.root}")
        row_bytes = self.dim * 4
        files = {int(n): self._open_vectors(int(n)) for n in np.unique(owner)}
        try:
            starts = np.array([files[int(n)][1] for n in owner], dtype=np.int64) + (rows - offsets[owner]) * row_bytes
            fds = np.array([files[int(n)][0] for n in owner], dtype=np.int64)
            order = np.lexsort((starts, fds))  # ascending offsets within each file
            reads = list(zip(fds[order].tolist(), starts[order].tolist(), (order * row_bytes).tolist(), strict=True))
            into = out.data.cast("B")
            missed = read_cached(reads, into, row_bytes)

            def read(part: list[Read]) -> None:
                for fd, start, at in part:
                    if os.preadv(fd, [into[at : at + row_bytes]], start) != row_bytes:
                        raise MmcurateError(f"short read in the vector store at {self.root}")

            parts = [
                missed[i * len(missed) // GATHER_THREADS : (i + 1) * len(missed) // GATHER_THREADS]
                for i in range(GATHER_THREADS)
            ]
            if missed:
                with ThreadPoolExecutor(GATHER_THREADS) as pool:
                    list(pool.map(read, parts))
        finally:
            for fd, _ in files.values():
                os.close(fd)
        return out

    def _open_vectors(self, number: int) -> tuple[int, int]:
        """(file descriptor, byte offset of row 0) of shard ``number``'s vector file."""
        if not self.embedded(number):
            raise MmcurateError(f"shard {number} of the vector store at {self.root} is not embedded yet")
        path = self.vectors_path(number)
        with path.open("rb") as handle:
            version = np.lib.format.read_magic(handle)
            header_of = (
                np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            )
            shape, fortran, dtype = header_of(handle)
            header = handle.tell()
        if dtype != np.float32 or fortran or len(shape) != 2 or shape[1] != self.dim:
            raise MmcurateError(f"{path} is not a C-order float32 array of {self.dim} columns")
        return os.open(path, os.O_RDONLY), header

    def records(self, rows: Iterable[int]) -> dict[int, dict[str, str]]:
        """Global row -> its record ``{doc_id, title, text}``, reading only the row groups needed."""
        wanted = sorted(set(int(r) for r in rows))
        found: dict[int, dict[str, str]] = {}
        shards = self.record_shards()
        offsets = [s.offset for s in shards]
        by_group: dict[tuple[int, int], list[int]] = {}
        for row in wanted:
            number = int(np.searchsorted(offsets, row, side="right") - 1)
            if row < 0 or number < 0 or row >= shards[number].offset + shards[number].rows:
                raise MmcurateError(f"row {row} out of range of the vector store at {self.root}")
            by_group.setdefault((number, (row - offsets[number]) // ROW_GROUP), []).append(row)
        for (number, group), members in by_group.items():
            table = pq.ParquetFile(self.records_path(number)).read_row_group(group)
            batch = table.to_pylist()
            for row in members:
                found[row] = batch[row - offsets[number] - group * ROW_GROUP]
        return found

    def _require_complete(self) -> None:
        if not self.complete():
            raise MmcurateError(
                f"the vector store at {self.root} is not complete: "
                f"{len(self.pending())} shards still to embed, records complete: {self.records_complete()}"
            )


def load_store(root: Path) -> VectorStore:
    """The existing store at ``root`` as it is (a worker embedding one of its shards)."""
    meta = _read_json(Path(root) / "store.json")
    if meta is None:
        raise MmcurateError(f"no vector store at {root}")
    return VectorStore(Path(root), meta)


def open_store(
    root: Path, encoder: str, dim: int, source: str, shard_rows: int = SHARD_ROWS, rebuild: bool = False
) -> VectorStore:
    """The store at ``root`` for vectors of ``encoder`` (``dim``) over the records of ``source``;
    created when missing. Another encoder or dimension is refused unless ``rebuild`` (its
    vectors are dropped); another source or shard size is always refused."""
    root = Path(root)
    meta = {
        "format": FORMAT,
        "encoder": encoder,
        "dim": int(dim),
        "dtype": "float32",
        "source": source,
        "shard_rows": int(shard_rows),
    }
    found = _read_json(root / "store.json")
    if found is None:
        (root / "records").mkdir(parents=True, exist_ok=True)
        (root / "vectors").mkdir(parents=True, exist_ok=True)
        _write_json(root / "store.json", meta)
        return VectorStore(root, meta)
    for key in ("source", "shard_rows", "format"):
        if found.get(key) != meta[key]:
            raise MmcurateError(
                f"the vector store at {root} holds {key} {found.get(key)!r}, not {meta[key]!r}; use another folder"
            )
    if (found["encoder"], found["dim"]) != (encoder, dim):
        if not rebuild:
            raise MmcurateError(
                f"the vector store at {root} was embedded with {found['encoder']} ({found['dim']}-d), "
                f"not {encoder} ({dim}-d); rebuild it or use another folder"
            )
        shutil.rmtree(root / "vectors")
        (root / "vectors").mkdir()
        _write_json(root / "store.json", meta)
    return VectorStore(root, meta)


def write_records(store: VectorStore, documents: Iterable[Mapping[str, Any]]) -> int:
    """Cut ``documents`` (``{doc_id, title, text}``, in a fixed order) into record shards of
    ``store.shard_rows``; resumes after the last finished shard. Returns the store's row count."""
    if store.records_complete():
        return len(store)
    done = store.record_shards()
    last = _read_json(store.records_path(len(done) - 1).with_suffix(".json")) if done else {"next": 0}
    assert last is not None  # a finished record shard has its meta file
    consumed = int(last["next"])
    stream = islice(iter(documents), consumed, None)
    number = len(done)
    while batch := list(islice(stream, store.shard_rows)):
        consumed += len(batch)
        path = store.records_path(number)
        tmp = path.with_name(f".{path.name}.tmp")
        pq.write_table(pa.Table.from_pylist(batch, schema=RECORDS), tmp, row_group_size=ROW_GROUP, compression="zstd")
        os.replace(tmp, path)
        _write_json(path.with_suffix(".json"), {"rows": len(batch), "next": consumed})
        number += 1
    _write_json(store.root / "records" / "complete.json", {"shards": number, "rows": len(store)})
    return len(store)


def embed_shard(store: VectorStore, number: int, encode: Encode, batch: int = BATCH) -> bool:
    """Embed record shard ``number`` (pages as ``kb.page_text``) into its vector file; False when it
    was already finished. The file is filled batch by batch under a temporary name."""
    if store.embedded(number):
        return False
    path = store.vectors_path(number)
    records = pq.read_table(store.records_path(number), columns=["title", "text"])
    texts = [page_text(t, x) for t, x in zip(records["title"].to_pylist(), records["text"].to_pylist())]
    del records
    tmp = path.with_name(f".{path.name}.tmp")
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(len(texts), store.dim))
    for start in range(0, len(texts), batch):
        vectors = np.asarray(encode(texts[start : start + batch]), dtype=np.float32)
        if vectors.shape != (len(texts[start : start + batch]), store.dim):
            raise MmcurateError(
                f"encoder {store.encoder} returned shape {vectors.shape} for "
                f"{len(texts[start : start + batch])} texts; the store is {store.dim}-d"
            )
        out[start : start + len(vectors)] = vectors
    out.flush()
    del out
    os.replace(tmp, path)
    _write_json(path.with_suffix(".json"), {"rows": len(texts), "encoder": store.encoder})
    return True


def embed_store(store: VectorStore, encode: Encode, progress: Progress = to_stderr, batch: int = BATCH) -> None:
    """Embed every pending shard in order (the sequential path), with progress and an ETA."""
    pending = store.pending()
    total = sum(s.rows for s in pending)
    done = 0
    started = time.monotonic()
    for shard in pending:
        embed_shard(store, shard.number, encode, batch)
        done += shard.rows
        progress(eta_line(done, total, time.monotonic() - started, f"shard {shard.number:05d}"))


def eta_line(done: int, total: int, seconds: float, what: str) -> str:
    """``what: done/total rows (pct), rate rows/s, ETA h:mm:ss``."""
    rate = done / seconds if seconds > 0 else 0.0
    left = (total - done) / rate if rate > 0 else 0.0
    eta = time.strftime("%H:%M:%S", time.gmtime(left)) if left < 86_400 else f"{left / 3600:,.0f} h"
    return f"{what}: {done:,}/{total:,} rows ({done / max(total, 1):.0%}), {rate:,.0f} rows/s, ETA {eta}"
