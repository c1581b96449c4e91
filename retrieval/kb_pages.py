"""A knowledge base's pages, searchable by embedding, at any size within a memory budget.

``open_kb_pages(cfg, index_dir)`` counts the KB's documents (streamed) and asks
``index_plan.plan_index(n, encoder dim, cfg.memory_gb)`` which index it gets:

- ``flat`` / ``ivf``: the KB is loaded as a table and indexed in memory, cached on disk by
  encoder and content (``vector_index.cached_index``), exactly as before (``TablePages``).
- ``ivfpq``: the KB's pages go to an on-disk vector store (``vector_store``: records streamed
  into shards, then embedded shard by shard, resumable), and a compressed index over it
  (``compressed_index``) answers searches with exact re-scoring; page texts are read back
  from the store's record shards, so the KB is never held in memory (``StorePages``).

Pages are the unit, as in the paper's Stage II (seed 003, eq. 1 and Appendix: an index
``W_T`` of Wikipedia pages, the top 10 pages retrieved, *then* cut into 250-token passages):
the store holds pages, and the mining cuts the retrieved ones.

The store of a KB lives under ``<index_dir>/kb-store-<key>``, ``key`` a hash of the KB spec,
``kb_limit``, the size and modification time of its files, and the encoder name: another KB,
an edited file or another encoder gets another store.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from mmcurate.benchmarks.deflectionbench import RetrievalConfig
from mmcurate.core.specs import KBPath

from .compressed_index import CompressedIndex, cached_compressed
from .encoders import TextEncoder, text_encoder
from .index_plan import IndexPlan, plan_index
from .kb import count_documents, iter_documents, kb_fingerprint, load_kb, page_text, wiki_offline_path
from .vector_index import VectorIndex, cached_index
from .vector_store import SHARD_ROWS, Progress, VectorStore, embed_store, open_store, to_stderr, write_records

STORE_SHARD_ROWS = SHARD_ROWS  # pages per shard: the unit a task runner embeds and a crash repeats


class TablePages:
    """A KB held as a table, with today's in-memory index (built on first search)."""

    def __init__(self, kb: pa.Table, index_dir: Path, encoder: TextEncoder) -> None:
        self.kb = kb
        self._index_dir = Path(index_dir)
        self._encoder = encoder
        self._index: VectorIndex | None = None

    def __len__(self) -> int:
        return self.kb.num_rows

    def search(self, queries: np.ndarray, k: int) -> np.ndarray:
        return self.index.search(queries, k)[1]

    def pages(self, rows: list[int]) -> dict[int, tuple[str, str, str]]:
        """Row -> (doc_id, title, text)."""
        return {
            r: (self.kb["doc_id"][r].as_py(), self.kb["title"][r].as_py(), self.kb["text"][r].as_py()) for r in rows
        }

    @property
    def index(self) -> VectorIndex:
        if self._index is None:
            titles, texts = self.kb["title"].to_pylist(), self.kb["text"].to_pylist()
            self._index = cached_index(
                self._index_dir,
                "kb-pages",
                self._encoder.name,
                kb_fingerprint(self.kb),
                self.kb["doc_id"].to_pylist(),
                lambda: self._encoder.encode_text([page_text(t, x) for t, x in zip(titles, texts)]),
            )
        return self._index

    def record(self) -> dict[str, Any]:
        """What the manifest says of this index: flat search is exact (recall 1.0); an IVF index
        reached ``calibration_recall`` on 256 of its own rows when its nprobe was calibrated."""
        index = self.index
        exact = index.kind == "flat"
        return {
            "name": "kb-pages",
            "kind": index.kind,
            "params": index.params,
            "count": len(index),
            "dim": index.dim,
            "encoder": self._encoder.name,
            "recall_at_10": 1.0 if exact else index.params.get("calibration_recall"),
            "recall_measured_on": "exact search" if exact else "256 indexed rows against exact search",
            "build_seconds": index.build_seconds,
        }


class StorePages:
    """A KB in an on-disk vector store, searched through its compressed index."""

    def __init__(self, index: CompressedIndex, encoder: TextEncoder) -> None:
        self.index = index
        self._encoder = encoder

    def __len__(self) -> int:
        return len(self.index)

    def search(self, queries: np.ndarray, k: int) -> np.ndarray:
        return self.index.search(queries, k)[1]

    def pages(self, rows: list[int]) -> dict[int, tuple[str, str, str]]:
        return {r: (rec["doc_id"], rec["title"], rec["text"]) for r, rec in self.index.store.records(rows).items()}

    def record(self) -> dict[str, Any]:
        meta = self.index.meta
        return {
            "name": "kb-pages",
            "kind": "ivfpq",
            "params": meta["params"],
            "factory": meta["factory"],
            "count": meta["count"],
            "dim": meta["dim"],
            "encoder": meta["encoder"],
            "recall_at_10": meta["recall_at_10"],
            "recall_measured_on": f"{meta['calibration_queries']} held-out KB rows against exact search, "
            "after re-scoring",
            "build_seconds": meta["build_seconds"],
        }


KBPages = TablePages | StorePages


def kb_plan(cfg: RetrievalConfig, encoder: TextEncoder) -> tuple[int, IndexPlan]:
    """The KB's document count (streamed) and the index it gets within ``cfg.memory_gb``."""
    n = count_documents(cfg.kb, cfg.kb_limit)
    return n, plan_index(n, encoder.dim, cfg.memory_gb)


def kb_store(cfg: RetrievalConfig, index_dir: Path, encoder: TextEncoder) -> VectorStore:
    """The KB's vector store (module docstring), opened or created; nothing is embedded here."""
    source = _source_identity(cfg)
    key = hashlib.sha256(f"{source}\x1f{encoder.name}".encode()).hexdigest()[:24]
    return open_store(Path(index_dir) / f"kb-store-{key}", encoder.name, encoder.dim, source, STORE_SHARD_ROWS)


def fill_store(store: VectorStore, cfg: RetrievalConfig, encoder: TextEncoder, progress: Progress = to_stderr) -> None:
    """Records streamed in, then every pending shard embedded here, in order (the sequential path;
    ``tasks/kb_store.py`` fans shards out on a task runner)."""
    write_records(store, iter_documents(cfg.kb, cfg.kb_limit))
    embed_store(store, encoder.encode_text, progress)


def open_kb_pages(cfg: RetrievalConfig, index_dir: Path, progress: Progress = to_stderr) -> KBPages:
    """The KB's pages behind the index ``plan_index`` picks for its size (module docstring)."""
    encoder = text_encoder(cfg.text_encoder)
    _, plan = kb_plan(cfg, encoder)
    if plan.kind != "ivfpq":
        return TablePages(load_kb(cfg.kb, cfg.kb_limit), index_dir, encoder)
    store = kb_store(cfg, index_dir, encoder)
    fill_store(store, cfg, encoder, progress)
    return StorePages(cached_compressed(store, plan, progress), encoder)


def _source_identity(cfg: RetrievalConfig) -> str:
    """The KB spec and limit, with the size and mtime of every file it reads."""
    if isinstance(cfg.kb, KBPath):
        root = cfg.kb.path.expanduser()
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
    else:
        files = [wiki_offline_path()]
    stats = ";".join(f"{p}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files if p.exists())
    return f"{cfg.kb} limit={cfg.kb_limit} [{stats}]"
