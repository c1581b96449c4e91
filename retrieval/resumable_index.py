"""An index over a knowledge base whose embedding resumes and says how far it is.

``cached_index`` embeds everything in one call and logs nothing: on a 10k-page knowledge base
the first RefLVQA evaluation of a workdir was silent for minutes, and an interrupted one
embedded everything again. ``resumable_index`` gives the same index (the same cache folder,
``vector_index.index_folder``) but embeds through an on-disk ``vector_store`` beside it
(``<folder>.store``): records in shards of ``shard_rows``, each shard's vectors written and
marked once finished, so a killed run resumes at the first unfinished shard and never embeds
a finished row again. One builder at a time per index: a second one (another shard of the same
stage, on a thread or in another process) waits on a lock beside the folder and then loads what
the first placed. It prints ``<name>: embedding: done/total rows (pct), rate, ETA`` as
shards finish, at most one line every ``every`` seconds (and the last), then one line before
and one after building the index. The store is removed once the index is in place.
"""

from __future__ import annotations

import fcntl
import shutil
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from mmcurate.core.plural import counted

from .vector_index import VectorIndex, build_index, choose_kind, index_folder, place_built
from .vector_store import BATCH, Encode, Progress, embed_shard, eta_line, open_store, to_stderr, write_records

SHARD_ROWS = 2_048  # at most this many rows embedded again after an interruption
EVERY = 10.0  # at most one progress line per this many seconds (and the last)


@contextmanager
def _one_builder(folder: Path) -> Iterator[None]:
    """Hold the lock of ``folder``'s build (``.<name>.lock`` beside it) while building it."""
    with open(folder.with_name(f".{folder.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def resumable_index(
    cache_dir: Path,
    name: str,
    encoder_name: str,
    dim: int,
    fingerprint: str,
    ids: list[str],
    items: Sequence[str],
    encode: Encode,
    progress: Progress = to_stderr,
    shard_rows: int = SHARD_ROWS,
    batch: int = BATCH,
    every: float = EVERY,
) -> VectorIndex:
    """The index of ``items`` (texts, or what ``encode`` reads: image sha256s) under ``ids``:
    loaded from the cache, or embedded resumably and built (see the module docstring)."""
    folder = index_folder(cache_dir, name, encoder_name, fingerprint, ids)
    if (folder / "meta.json").is_file():
        return VectorIndex.load(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _one_builder(folder):
        if (folder / "meta.json").is_file():  # placed by the builder this one waited for
            return VectorIndex.load(folder)
        started = time.monotonic()
        store = open_store(folder.with_name(f"{folder.name}.store"), encoder_name, dim, folder.name, shard_rows)
        write_records(store, ({"doc_id": i, "title": None, "text": item} for i, item in zip(ids, items)))
        pending = store.pending()
        total = sum(s.rows for s in pending)
        if total < len(ids):
            progress(
                f"{name}: resuming, {len(ids) - total:,} of {counted(len(ids), 'row', grouped=True)} embedded before"
            )
        done, last, begun = 0, float("-inf"), time.monotonic()
        for shard in pending:
            embed_shard(store, shard.number, encode, batch)
            done += shard.rows
            now = time.monotonic()
            if done == total or now - last >= every:
                last = now
                progress(eta_line(done, total, now - begun, f"{name}: embedding"))
        vectors = np.concatenate([rows for _, rows in store.chunks()]) if len(ids) else np.zeros((0, dim), np.float32)
        progress(f"{name}: building a {choose_kind(len(ids))} index over {len(ids):,} vectors")
        built = build_index(vectors, ids)
        built.build_seconds = round(time.monotonic() - started, 1)
        placed = place_built(built, folder, VectorIndex.load)
        progress(f"{name}: index ready ({built.build_seconds:,.1f} s)")
        shutil.rmtree(store.root, ignore_errors=True)
        return placed
