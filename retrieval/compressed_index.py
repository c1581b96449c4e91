"""IVF-PQ over an on-disk vector store (``vector_store``), candidates re-scored exactly.

For knowledge bases whose vectors do not fit the memory budget (``index_plan``). Built by
``build_compressed`` from a complete store, streaming:

1. Training: k-means for ``nlist`` coarse centroids (``KMEANS_ITERATIONS`` = 10, seeded) and
   the product quantizer (``m`` sub-quantizers of 256 centroids each; with ``opq``, an OPQ
   rotation first) on a seeded sample of ``TRAIN_PER_LIST`` = 64 rows per list (131,072 at
   2,048 lists), read from the shards, outside the calibration rows of step 3 unless fewer rows
   than k-means needs (``nlist``, and 256 per sub-quantizer) would be left; a store with fewer
   rows than that is refused.
2. Adding: the store is read a chunk at a time (``VectorStore.chunks``) and each chunk is
   added with its global row numbers as ids (``add_with_ids``), so resident memory is the
   codes plus one chunk, never the vectors.
3. Calibration, measured on ``CALIBRATION_QUERIES`` = 256 held-out rows (sampled, seeded,
   outside the training sample), whose exact top 10 over the whole store (their own row left
   out) is computed chunk by chunk during step 2 at the cost of one matrix product per chunk:
   ``nprobe`` doubles (from ``nlist / 256``) until recall@10 *after re-scoring* reaches
   ``CALIBRATION_RECALL`` = 0.97. The recall reached, the number of queries and the build
   time are recorded with the index (``meta.json``) and reach the release manifest.

Search (``CompressedIndex.search``): the PQ index proposes ``candidates_per_result * k``
rows per query (100 for a top 10); their float32 vectors are read from the store (only those
rows, ``VectorStore.gather``) and re-scored with the exact inner product, ties broken by row.
So the ranking of what is found is exact, and recall is limited only by what the quantized
search proposes: ``set_nprobe`` widens the lists searched, ``set_candidates_per_result`` the
candidates re-scored (past every list, the PQ codes' ranking is what bounds recall).

faiss factory strings (``OPQ96,IVF2048,PQ96x8np``; ``np``: no polysemous training, which
only serves Hamming-filtered search and took minutes even on 1,000 training rows), ``add_with_ids`` on IVF indexes and
``extract_index_ivf`` are as documented in the faiss wiki ("The index factory", "Faster
search", github.com/facebookresearch/faiss/wiki).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from mmcurate.core.errors import MmcurateError
from mmcurate.core.plural import counted

from .index_plan import TRAIN_PER_LIST, IndexPlan
from .vector_index import place_built
from .vector_store import Progress, VectorStore, eta_line, to_stderr

KMEANS_ITERATIONS = 10
CALIBRATION_QUERIES = 256
CALIBRATION_RECALL = 0.97
CALIBRATION_K = 10
QUERY_BLOCK = 256  # queries whose candidates are gathered from disk together
SEED = 0


class CompressedIndex:
    """A trained IVF-PQ index over a store's rows, its search parameters and build record."""

    def __init__(self, index: faiss.Index, store: VectorStore, meta: dict[str, Any]) -> None:
        self.index = index
        self.store = store
        self.meta = meta
        self.kind = "ivfpq"
        self.set_nprobe(int(meta["params"].get("nprobe", 1)))

    @property
    def params(self) -> dict[str, Any]:
        return self.meta["params"]

    @property
    def dim(self) -> int:
        return int(self.index.d)

    def __len__(self) -> int:
        return int(self.index.ntotal)

    def set_nprobe(self, nprobe: int) -> None:
        faiss.extract_index_ivf(self.index).nprobe = nprobe
        self.meta["params"]["nprobe"] = nprobe

    def set_candidates_per_result(self, candidates: int) -> None:
        """Re-score ``candidates * k`` vectors for a top ``k``: recall beyond what every list gives
        (the PQ codes' ranking bounds it), at the cost of reading more vectors from the store."""
        if candidates < 1:
            raise MmcurateError(f"candidates per result must be at least 1, got {candidates}")
        self.meta["params"]["candidates_per_result"] = candidates

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact inner products and global store rows of the top ``k`` among the candidates, best
        first, -1 (score -inf) where fewer exist."""
        queries = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        if queries.shape[1] != self.dim:
            raise MmcurateError(f"query dimension {queries.shape[1]} does not match index dimension {self.dim}")
        scores = np.full((len(queries), max(k, 0)), -np.inf, dtype=np.float32)
        rows = np.full((len(queries), max(k, 0)), -1, dtype=np.int64)
        if k < 1 or not len(queries):
            return scores, rows
        wanted = max(k, int(self.params["candidates_per_result"]) * k)
        _, candidates = self.index.search(queries, wanted)
        for start in range(0, len(queries), QUERY_BLOCK):
            block = candidates[start : start + QUERY_BLOCK]
            unique = np.unique(block[block >= 0])
            vectors = self.store.gather(unique)
            for i, found in enumerate(block, start):
                found = found[found >= 0]
                exact = vectors[np.searchsorted(unique, found)] @ queries[i]
                order = np.lexsort((found, -exact))[:k]
                scores[i, : len(order)] = exact[order]
                rows[i, : len(order)] = found[order]
        return scores, rows

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        faiss.write_index(self.index, str(folder / "index.faiss"))
        (folder / "meta.json").write_text(json.dumps(self.meta, sort_keys=True), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path, store: VectorStore) -> CompressedIndex:
        try:
            meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
            index = faiss.read_index(str(folder / "index.faiss"))
        except (OSError, ValueError, RuntimeError) as exc:
            raise MmcurateError(f"compressed index at {folder} is unreadable: {exc}") from None
        if (meta["encoder"], meta["count"]) != (store.encoder, len(store)):
            raise MmcurateError(
                f"compressed index at {folder} was built over {meta['count']:,} {meta['encoder']} "
                f"vectors; the store holds {len(store):,} {store.encoder} vectors"
            )
        return cls(index, store, meta)


def factory_string(dim: int, params: dict[str, Any]) -> str:
    m, nlist, nbits = params["m"], params["nlist"], params["nbits"]
    return f"{f'OPQ{m},' if params['opq'] else ''}IVF{nlist},PQ{m}x{nbits}np"


def build_compressed(store: VectorStore, plan: IndexPlan, progress: Progress = to_stderr) -> CompressedIndex:
    """Train, fill and calibrate an IVF-PQ index over ``store`` (module docstring)."""
    if plan.kind != "ivfpq":
        raise MmcurateError(f"build_compressed builds ivfpq indexes, not {plan.kind!r}")
    if not store.complete():
        raise MmcurateError(f"the vector store at {store.root} is not complete; embed it first")
    started = time.monotonic()
    n, dim = len(store), store.dim
    params: dict[str, Any] = dict(plan.params)
    least = max(int(params["nlist"]), 2 ** int(params["nbits"]))  # k-means needs a row per centroid
    if n < least:
        raise MmcurateError(
            f"an {factory_string(dim, params)} index needs at least {least:,} rows to train; "
            f"the store at {store.root} holds {n:,}"
        )
    rng = np.random.default_rng(SEED)
    train_rows, held_out = _samples(n, params["nlist"] * TRAIN_PER_LIST, CALIBRATION_QUERIES, least, rng)
    index = faiss.index_factory(dim, factory_string(dim, params), faiss.METRIC_INNER_PRODUCT)
    ivf = faiss.extract_index_ivf(index)
    ivf.cp.niter = KMEANS_ITERATIONS
    ivf.cp.seed = SEED
    ivf.cp.max_points_per_centroid = TRAIN_PER_LIST
    train = store.gather(train_rows)
    index.train(train)
    del train
    progress(
        f"trained {factory_string(dim, params)} on {counted(len(train_rows), 'row', grouped=True)} in "
        f"{time.monotonic() - started:.0f}s"
    )
    queries = store.gather(held_out)
    truth = _TopK(len(held_out), CALIBRATION_K + 1)
    added = 0
    adding = time.monotonic()
    for offset, chunk in store.chunks():
        ids = np.arange(offset, offset + len(chunk), dtype=np.int64)
        index.add_with_ids(chunk, ids)
        truth.push(queries @ chunk.T, ids)
        added += len(chunk)
        progress(eta_line(added, n, time.monotonic() - adding, "adding"))
    built = CompressedIndex(
        index,
        store,
        {
            "kind": "ivfpq",
            "params": params,
            "count": n,
            "dim": dim,
            "encoder": store.encoder,
            "factory": factory_string(dim, params),
        },
    )
    nprobe, recall = _calibrate(built, queries, held_out, truth.rows(exclude=held_out))
    built.set_nprobe(nprobe)
    built.meta.update(
        {
            "recall_at_10": round(recall, 4),
            "calibration_queries": len(held_out),
            "build_seconds": round(time.monotonic() - started, 1),
        }
    )
    progress(f"nprobe {nprobe}: recall@{CALIBRATION_K} {recall:.3f} after re-scoring on {len(held_out)} held-out rows")
    return built


def cached_compressed(store: VectorStore, plan: IndexPlan, progress: Progress = to_stderr) -> CompressedIndex:
    """The index of ``plan`` over ``store``, kept in the store folder: loaded, or built once
    (into a temporary folder renamed into place, so a killed build leaves nothing half-made)."""
    key = factory_string(store.dim, plan.params).replace(",", "_")
    folder = store.root / f"index-{key}-c{plan.params['candidates_per_result']}"
    if (folder / "meta.json").is_file():
        return CompressedIndex.load(folder, store)
    built = build_compressed(store, plan, progress)
    return place_built(built, folder, lambda found: CompressedIndex.load(found, store))


def _samples(n: int, train: int, queries: int, least: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Sorted training rows and held-out query rows, disjoint when ``n`` allows it: when fewer
    than ``least`` rows (what k-means needs) would be left beside the held-out ones, training
    draws from all rows."""
    order = rng.permutation(n)
    held_out = np.sort(order[: min(queries, n)])
    rest = order[len(held_out) :] if n - len(held_out) >= least else order
    return np.sort(rest[: min(train, len(rest))]), held_out


class _TopK:
    """The running exact top ``k`` rows per query over chunks of scores."""

    def __init__(self, queries: int, k: int) -> None:
        self.k = k
        self.scores = np.full((queries, 0), -np.inf, dtype=np.float32)
        self.ids = np.zeros((queries, 0), dtype=np.int64)

    def push(self, scores: np.ndarray, ids: np.ndarray) -> None:
        keep = min(self.k, scores.shape[1])
        part = (
            np.argpartition(-scores, keep - 1, axis=1)[:, :keep]
            if keep < scores.shape[1]
            else np.broadcast_to(np.arange(scores.shape[1]), scores.shape)
        )
        merged_scores = np.concatenate([self.scores, np.take_along_axis(scores, part, 1)], axis=1)
        merged_ids = np.concatenate([self.ids, ids[part]], axis=1)
        best = np.lexsort((merged_ids, -merged_scores), axis=1)[:, : self.k]
        self.scores = np.take_along_axis(merged_scores, best, 1)
        self.ids = np.take_along_axis(merged_ids, best, 1)

    def rows(self, exclude: np.ndarray) -> list[set[int]]:
        """Each query's best ``k - 1`` rows other than its own row ``exclude[i]``."""
        return [set([r for r in row.tolist() if r != own][: self.k - 1]) for row, own in zip(self.ids, exclude)]


def recall(found: np.ndarray, truth: list[set[int]], exclude: np.ndarray, k: int = CALIBRATION_K) -> float:
    """Share of ``truth`` rows among each query's first ``k`` found rows (its own row left out)."""
    hits = total = 0
    for row, want, own in zip(found, truth, exclude):
        got = [r for r in row.tolist() if r >= 0 and r != own][:k]
        hits += len(want & set(got))
        total += len(want)
    return hits / max(total, 1)


def _calibrate(
    index: CompressedIndex, queries: np.ndarray, own: np.ndarray, truth: list[set[int]]
) -> tuple[int, float]:
    nlist = int(index.params["nlist"])
    nprobe = max(1, nlist // 256)
    while True:
        index.set_nprobe(nprobe)
        _, found = index.search(queries, CALIBRATION_K + 1)
        reached = recall(found, truth, own)
        if reached >= CALIBRATION_RECALL or nprobe >= nlist:
            return nprobe, reached
        nprobe = min(nprobe * 2, nlist)
