"""Inner-product vector indexes (faiss) over L2-normalised rows, and an on-disk cache of them.

Kinds and when :func:`choose_kind` picks them:

- ``flat`` (exact, ``IndexFlatIP``) below ``IVF_FROM`` = 50,000 vectors: exact search over
  fewer than 50k rows takes milliseconds per query, and there is nothing to train.
- ``ivf`` (``IndexIVFFlat``) from 50,000 vectors on. ``nlist = 4 * sqrt(n)`` (4,000 lists
  at 1M), at most ``n / 40`` so every centroid trains on 40+ points; k-means trains on at
  most 64 points per list, 10 iterations (a sample keeps training to minutes on 2 cores).
  ``nprobe`` is then calibrated on the built index: 256 indexed vectors, seeded, are
  searched exactly and with doubling ``nprobe`` (from ``nlist/256``) until their recall@10
  (each vector's own row excluded) reaches ``CALIBRATION_RECALL`` = 0.97, a margin over the
  0.95 the mining needs. ``bench/faiss_mining.py`` measures recall and speed-up at 1M.
- ``hnsw`` (``IndexHNSWFlat``, M=32, efConstruction=80, efSearch=128) only on request: on 2
  cores it builds several times slower than IVF at the same recall.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import faiss
import numpy as np

from mmcurate.core.errors import MmcurateError

KINDS = ("flat", "ivf", "hnsw")
IVF_FROM = 50_000
MIN_POINTS_PER_LIST = 40
TRAIN_POINTS_PER_LIST = 64
KMEANS_ITERATIONS = 10
CALIBRATION_QUERIES = 256
CALIBRATION_RECALL = 0.97
CALIBRATION_K = 10
HNSW_M, HNSW_EF_CONSTRUCTION, HNSW_EF_SEARCH = 32, 80, 128
SEED = 0


class _Saves(Protocol):
    def save(self, folder: Path) -> None: ...


Built = TypeVar("Built", bound=_Saves)


def choose_kind(n: int) -> str:
    return "flat" if n < IVF_FROM else "ivf"


def ivf_nlist(n: int) -> int:
    return max(1, min(round(4 * math.sqrt(n)), n // MIN_POINTS_PER_LIST))


class VectorIndex:
    """A faiss index, the string id of every row, and the search parameters it was tuned to."""

    def __init__(
        self,
        index: faiss.Index,
        ids: list[str],
        kind: str,
        params: dict[str, int | float],
        build_seconds: float | None = None,
    ) -> None:
        if index.ntotal != len(ids):
            raise ValueError(f"index holds {index.ntotal} vectors but {len(ids)} ids were given")
        self.index = index
        self.ids = ids
        self.kind = kind
        self.params = params
        self.build_seconds = build_seconds  # embedding and building, when known (``cached_index`` records it)
        self._apply_params()

    @property
    def dim(self) -> int:
        return int(self.index.d)

    def __len__(self) -> int:
        return int(self.index.ntotal)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Scores (inner product) and row positions of the top ``k``, -1 where fewer exist."""
        queries = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        if queries.shape[1] != self.dim:
            raise MmcurateError(f"query dimension {queries.shape[1]} does not match index dimension {self.dim}")
        if k < 1 or len(queries) == 0:
            return np.zeros((len(queries), max(k, 0)), np.float32), np.full((len(queries), max(k, 0)), -1, np.int64)
        scores, rows = self.index.search(queries, k)
        return scores, rows

    def vectors(self, rows: list[int] | np.ndarray) -> np.ndarray:
        """The stored vectors at ``rows`` (exact: all kinds here store full vectors)."""
        return (
            np.stack([self.index.reconstruct(int(r)) for r in rows])
            if len(rows)
            else np.zeros((0, self.dim), np.float32)
        )

    def save(self, folder: Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        faiss.write_index(self.index, str(folder / "index.faiss"))
        (folder / "ids.json").write_text(json.dumps(self.ids), encoding="utf-8")
        meta = {
            "kind": self.kind,
            "params": self.params,
            "dim": self.dim,
            "count": len(self),
            "build_seconds": self.build_seconds,
        }
        (folder / "meta.json").write_text(json.dumps(meta, sort_keys=True), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> VectorIndex:
        folder = Path(folder)
        try:
            meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
            ids = json.loads((folder / "ids.json").read_text(encoding="utf-8"))
            # faiss returns the file's own index class (IVF, HNSW, flat) typed as its base
            index: Any = faiss.read_index(str(folder / "index.faiss"))
        except (OSError, ValueError, RuntimeError) as exc:
            raise MmcurateError(f"vector index at {folder} is unreadable: {exc}") from None
        if meta["kind"] == "ivf":
            index.make_direct_map()  # reconstruct() by row; a no-op if the file kept the map
        return cls(index, ids, meta["kind"], meta["params"], meta.get("build_seconds"))

    def _apply_params(self) -> None:
        index: Any = self.index  # the class its kind names (faiss types it as the base Index)
        if self.kind == "ivf":
            index.nprobe = int(self.params["nprobe"])
        elif self.kind == "hnsw":
            index.hnsw.efSearch = int(self.params["ef_search"])


def build_index(vectors: np.ndarray, ids: list[str], kind: str | None = None) -> VectorIndex:
    """Index ``vectors`` (rows L2-normalised) under ``ids``; ``kind`` defaults to choose_kind."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or len(vectors) != len(ids):
        raise MmcurateError(f"need one vector per id: got array {vectors.shape} for {len(ids)} ids")
    kind = kind or choose_kind(len(vectors))
    dim = vectors.shape[1]
    if kind == "flat":
        flat = faiss.IndexFlatIP(dim)
        flat.add(vectors)
        return VectorIndex(flat, list(ids), kind, {})
    if kind == "hnsw":
        hnsw = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        hnsw.add(vectors)
        return VectorIndex(hnsw, list(ids), kind, {"m": HNSW_M, "ef_search": HNSW_EF_SEARCH})
    if kind == "ivf":
        return _build_ivf(vectors, list(ids))
    raise MmcurateError(f"unknown index kind {kind!r}; use one of {', '.join(KINDS)}")


def _build_ivf(vectors: np.ndarray, ids: list[str]) -> VectorIndex:
    n, dim = vectors.shape
    if n < MIN_POINTS_PER_LIST:
        raise MmcurateError(f"an ivf index needs at least {MIN_POINTS_PER_LIST} vectors, got {n}; use kind 'flat'")
    nlist = ivf_nlist(n)
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.niter = KMEANS_ITERATIONS
    index.cp.seed = SEED
    index.cp.max_points_per_centroid = TRAIN_POINTS_PER_LIST
    rng = np.random.default_rng(SEED)
    train = (
        vectors
        if n <= nlist * TRAIN_POINTS_PER_LIST
        else vectors[np.sort(rng.choice(n, nlist * TRAIN_POINTS_PER_LIST, replace=False))]
    )
    index.train(train)
    index.add(vectors)
    index.make_direct_map()
    nprobe, recall = _calibrate_nprobe(index, vectors, rng)
    return VectorIndex(index, ids, "ivf", {"nlist": nlist, "nprobe": nprobe, "calibration_recall": round(recall, 4)})


def _calibrate_nprobe(index: faiss.IndexIVFFlat, vectors: np.ndarray, rng: np.random.Generator) -> tuple[int, float]:
    """The smallest doubling of nprobe whose recall@10 on sampled indexed vectors is high enough,
    and the recall it reached."""
    n = len(vectors)
    rows = np.sort(rng.choice(n, min(n, CALIBRATION_QUERIES), replace=False))
    queries = vectors[rows]
    k = min(CALIBRATION_K + 1, n)
    _, exact = faiss.knn(queries, vectors, k, metric=faiss.METRIC_INNER_PRODUCT)
    truth = [set(row.tolist()) - {int(q)} for row, q in zip(exact, rows)]
    nprobe = max(1, index.nlist // 256)
    while True:
        index.nprobe = nprobe
        _, found = index.search(queries, k)
        hits = sum(len(t & set(f.tolist())) for t, f in zip(truth, found))
        total = sum(len(t) for t in truth)
        if nprobe >= index.nlist or hits >= CALIBRATION_RECALL * total:
            return nprobe, hits / max(total, 1)
        nprobe = min(nprobe * 2, index.nlist)


def index_folder(cache_dir: Path, name: str, encoder_name: str, fingerprint: str, ids: list[str]) -> Path:
    """``<cache_dir>/<name>-<key>``, ``key`` a hash of encoder name, fingerprint and ids."""
    digest = hashlib.sha256()
    for part in (name, encoder_name, fingerprint, *ids):
        digest.update(part.encode("utf-8") + b"\x1f")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return Path(cache_dir) / f"{safe}-{digest.hexdigest()[:24]}"


def cached_index(
    cache_dir: Path,
    name: str,
    encoder_name: str,
    fingerprint: str,
    ids: list[str],
    embed: Callable[[], np.ndarray],
) -> VectorIndex:
    """The index of ``name`` for this encoder, content and ids: loaded from disk, or built once.

    The folder is ``<cache_dir>/<name>-<key>`` with ``key`` a hash of encoder name, fingerprint
    and ids, so any change builds a new index and nothing stale is ever served. A build is
    written to a temporary folder and renamed into place; if another process won the race,
    its index is used and ours discarded. ``embed()`` runs only on a miss.
    """
    folder = index_folder(cache_dir, name, encoder_name, fingerprint, ids)
    if (folder / "meta.json").is_file():
        return VectorIndex.load(folder)
    started = time.monotonic()
    built = build_index(embed(), ids)
    built.build_seconds = round(time.monotonic() - started, 1)
    folder.parent.mkdir(parents=True, exist_ok=True)
    return place_built(built, folder, VectorIndex.load)


def top_hits(index: VectorIndex, queries: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
    """(row, score) of the top ``k`` rows per query, best first (none when the index is empty)."""
    k = min(k, len(index))
    if k < 1 or len(queries) == 0:
        return [[] for _ in range(len(queries))]
    scores, rows = index.search(queries, k)
    return [[(int(r), float(s)) for r, s in zip(rs, ss) if r >= 0] for rs, ss in zip(rows, scores)]


def built_indexes(cache_dir: Path) -> list[str]:
    """The names of the finished index folders directly in ``cache_dir``: those ``place_built``
    renamed into place (a ``meta.json`` inside; a build's temporary folder starts with a dot)."""
    return sorted(p.parent.name for p in Path(cache_dir).glob("*/meta.json") if not p.parent.name.startswith("."))


def place_built(built: Built, folder: Path, load: Callable[[Path], Built]) -> Built:
    """``built`` saved into a temporary folder beside ``folder`` and renamed into place, so a
    killed build leaves nothing half-made; when another process renamed its copy first, its
    copy is loaded (``load``) and returned instead."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        built.save(tmp)
        os.rename(tmp, folder)
    except OSError:
        if not (folder / "meta.json").is_file():
            raise
        return load(folder)  # another process renamed its copy first
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return built
