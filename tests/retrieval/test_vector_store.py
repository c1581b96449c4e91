"""The on-disk vector store: a run killed mid-shard resumes at the last finished shard and ends
with the same vectors as an uninterrupted run; a store is never mixed across encoders."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from mmcurate.core.errors import MmcurateError
from mmcurate.retrieval import vector_store
from mmcurate.retrieval.vector_store import (
    embed_shard,
    embed_store,
    load_store,
    open_store,
    write_records,
)

DIM = 8
DOCS = [{"doc_id": f"d{i}", "title": f"T{i}" if i % 3 else "", "text": f"text number {i}"} for i in range(130)]


def vector(text: str) -> np.ndarray:
    """A deterministic unit vector per text (a stand-in encoder)."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


class Encoder:
    """Counts what it embeds; raises (a crash) once ``fail_after`` batches are done."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.fail_after = fail_after
        self.batches = 0
        self.texts: list[str] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        if self.fail_after is not None and self.batches >= self.fail_after:
            raise RuntimeError("killed mid-shard")
        self.batches += 1
        self.texts += texts
        return np.stack([vector(t) for t in texts])


def store_at(root: Path, encoder: str = "stub-v1", dim: int = DIM):
    return open_store(root, encoder, dim, "docs-130", shard_rows=50)


def all_vectors(store) -> np.ndarray:
    return np.concatenate([np.asarray(store.vectors(s.number)) for s in store.record_shards()])


def quiet(line: str) -> None:
    pass


def test_killed_mid_shard_resumes_at_the_last_finished_shard(tmp_path: Path) -> None:
    whole = store_at(tmp_path / "whole")
    write_records(whole, DOCS)
    embed_store(whole, Encoder(), quiet, batch=16)

    store = store_at(tmp_path / "crash")
    write_records(store, DOCS)
    crash = Encoder(fail_after=6)  # shard 0 takes 4 batches of 16; dies in shard 1's third batch
    with pytest.raises(RuntimeError, match="killed mid-shard"):
        embed_store(store, crash, quiet, batch=16)
    assert [store.embedded(n) for n in range(3)] == [True, False, False]
    assert not store.vectors_path(1).exists()  # only its temporary file: never read as complete
    assert [s.number for s in store.pending()] == [1, 2]
    with pytest.raises(MmcurateError, match="not embedded"):
        store.vectors(1)

    again = Encoder()
    embed_store(store, again, quiet, batch=16)
    assert len(again.texts) == 80  # shards 1 and 2 only: shard 0 is not embedded twice
    assert embed_shard(store, 0, again) is False and len(again.texts) == 80  # a retried task finds it done
    assert store.complete() and len(store) == 130
    np.testing.assert_array_equal(all_vectors(store), all_vectors(whole))
    np.testing.assert_array_equal(all_vectors(store)[[0, 1]], [vector("text number 0"), vector("T1\ntext number 1")])


def test_record_ingest_resumes_after_its_last_finished_shard(tmp_path: Path) -> None:
    def crashing():
        for i, doc in enumerate(DOCS):
            if i == 70:
                raise RuntimeError("killed while reading the KB")
            yield doc

    store = store_at(tmp_path / "s")
    with pytest.raises(RuntimeError):
        write_records(store, crashing())
    assert [s.rows for s in store.record_shards()] == [50] and not store.records_complete()
    assert write_records(store, DOCS) == 130
    assert [(s.offset, s.rows) for s in store.record_shards()] == [(0, 50), (50, 50), (100, 30)]
    read = [row for s in store.record_shards() for row in pq.read_table(store.records_path(s.number)).to_pylist()]
    assert read == DOCS


def test_rows_are_read_back_across_shards(tmp_path: Path) -> None:
    store = store_at(tmp_path / "s")
    write_records(store, DOCS)
    embed_store(store, Encoder(), quiet, batch=16)
    rows = np.array([129, 0, 50, 49, 50])
    expected = np.stack(
        [vector(f"{d['title']}\n{d['text']}" if d["title"] else d["text"]) for d in (DOCS[r] for r in rows)]
    )
    np.testing.assert_array_equal(store.gather(rows), expected)
    assert store.records([129, 49]) == {129: DOCS[129], 49: DOCS[49]}
    starts = [offset for offset, _ in store.chunks(size=40)]
    assert starts == [0, 40, 50, 90, 100]
    with pytest.raises(MmcurateError, match="out of range"):
        store.gather(np.array([130]))


@pytest.mark.parametrize("cache", ["every other row missed", "partly cached", "flag refused", "flag unknown"])
def test_rows_the_page_cache_cannot_serve_are_read_again_blocking(tmp_path: Path, monkeypatch, cache: str) -> None:
    """``gather`` first reads each row with ``RWF_NOWAIT`` in its own thread; a row the page cache
    lacks (the read fails at once), holds only in part (a short read), or every row where the
    file system refuses the flag or the platform has none, is read again blocking: the same
    vectors, and exactly the missed rows read twice."""
    store = store_at(tmp_path / "s")
    write_records(store, DOCS)
    embed_store(store, Encoder(), quiet, batch=16)
    rows = np.array([129, 0, 50, 49, 50, 7, 88])
    expected = np.stack(
        [vector(f"{d['title']}\n{d['text']}" if d["title"] else d["text"]) for d in (DOCS[r] for r in rows)]
    )
    real = os.preadv
    tried: list[int] = []
    blocking: list[int] = []

    def preadv(fd: int, buffers: list, offset: int, flags: int = 0) -> int:
        if not flags:
            blocking.append(offset)
            return real(fd, buffers, offset)
        tried.append(offset)
        if cache == "flag refused":
            raise OSError(errno.EOPNOTSUPP, "Operation not supported")
        if len(tried) % 2:
            return real(fd, buffers, offset)
        if cache == "partly cached":
            buffers[0][:4] = b"\xff" * 4
            return 4
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(vector_store.os, "preadv", preadv)
    if cache == "flag unknown":
        monkeypatch.setattr(vector_store, "NOWAIT", None)
    np.testing.assert_array_equal(store.gather(rows), expected)
    if cache in ("flag refused", "flag unknown"):
        assert len(tried) == (cache == "flag refused") and len(blocking) == len(rows)
    else:
        assert len(tried) == len(rows) and sorted(blocking) == sorted(tried[1::2])


def test_a_store_is_never_mixed_across_encoders(tmp_path: Path) -> None:
    store = store_at(tmp_path / "s")
    write_records(store, DOCS)
    embed_shard(store, 0, Encoder())
    with pytest.raises(MmcurateError, match="embedded with stub-v1"):
        store_at(tmp_path / "s", encoder="stub-v2")
    with pytest.raises(MmcurateError, match="embedded with stub-v1"):
        store_at(tmp_path / "s", dim=DIM * 2)
    rebuilt = open_store(tmp_path / "s", "stub-v2", DIM, "docs-130", shard_rows=50, rebuild=True)
    assert not rebuilt.embedded(0) and len(rebuilt) == 130  # vectors dropped, records kept
    assert load_store(tmp_path / "s").encoder == "stub-v2"
    with pytest.raises(MmcurateError, match="source"):
        open_store(tmp_path / "s", "stub-v2", DIM, "another-kb", shard_rows=50)


def test_a_wrong_vector_shape_is_refused_and_nothing_is_marked(tmp_path: Path) -> None:
    store = store_at(tmp_path / "s")
    write_records(store, DOCS)
    with pytest.raises(MmcurateError, match="returned shape"):
        embed_shard(store, 0, lambda texts: np.zeros((len(texts), DIM + 1), np.float32))
    assert not store.embedded(0)
