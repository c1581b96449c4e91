"""A knowledge base at the papers' size: the on-disk store and compressed index versus exact search.

Data: ``--n`` rows (6,000,000 by default, InfoSeek's KB) of ``--dim`` (768) float32 vectors and
``--queries`` (1,000) queries, L2-normalised draws from one clustered mixture: 5,000 components
of uneven weight whose centres cluster around 200 topics (as in ``bench/faiss_mining.py``),
with each row's offset from its centre drawn mostly inside a 64-dimensional subspace plus a
small isotropic part (embeddings of real text use far fewer directions than their width).
The rows are generated streaming, batch by batch from seeds, through the real store path
(``vector_store.write_records`` then ``embed_store`` with a generating stand-in encoder), so
the 18 GB never sit in memory.

Phases, each in its own child process so its peak RSS (``ru_maxrss``) is its own; exact search
and the index's search each start with the store's files evicted from the page cache:

- ``generate``: records and vectors into the store (resumable like any store);
- ``exact``: exact top 10 of every query, streamed over the store a chunk at a time (faiss
  ``knn`` per chunk, merged): the baseline and the ground truth;
- ``build``: ``plan_index(n, dim, --memory-gb)`` and the compressed index it names
  (train, add streamed, calibrate nprobe on held-out rows: its measured recall);
- ``search``: the loaded index answers the queries (PQ candidates re-scored from disk).

Printed: peak RSS of build and search (goal <= 4 GB), recall@10 against the exact top 10
(goal >= 0.95), queries/s against exact search (goal >= 50x), build time. ``--opq`` builds
and searches both variants (without and with the OPQ rotation) on the same store, the
measurement behind ``index_plan.OPQ_DEFAULT``. The store is deleted at the end unless ``--keep``.

    nice python bench/kb_scale.py [--n 6000000] [--dim 768] [--queries 1000] [--memory-gb 4]
                                  [--threads 2] [--dir DIR] [--keep] [--opq]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

THREADS_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
K = 10
TOPICS, COMPONENTS, SUBSPACE = 200, 5_000, 64
BATCH = 4_096
SEED = 42
ENCODER = "synthetic-mixture-v1"


def mixture(dim: int):
    """The mixture's fixed parts, from the seed alone: centres, weights, spreads, subspace."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    topics = rng.standard_normal((TOPICS, dim)).astype(np.float32)
    topics /= np.linalg.norm(topics, axis=1, keepdims=True)
    offsets = rng.standard_normal((COMPONENTS, dim)).astype(np.float32) * (0.7 / np.sqrt(dim))
    centres = topics[rng.integers(0, TOPICS, COMPONENTS)] + offsets
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    weights = rng.dirichlet(np.full(COMPONENTS, 2.0))
    spread = rng.uniform(0.5, 1.0, COMPONENTS).astype(np.float32)
    basis = np.linalg.qr(rng.standard_normal((dim, SUBSPACE)))[0].T.astype(np.float32)
    return centres, weights, spread, basis


def draw(first: int, size: int, parts) -> "np.ndarray":
    """Rows ``first .. first+size`` of the data (a function of ``first`` only: reruns agree)."""
    import numpy as np

    centres, weights, spread, basis = parts
    rng = np.random.default_rng([SEED, first])
    component = rng.choice(len(centres), size=size, p=weights)
    noise = rng.standard_normal((size, SUBSPACE), dtype=np.float32) @ basis * (0.9 / np.sqrt(SUBSPACE))
    noise += rng.standard_normal((size, centres.shape[1]), dtype=np.float32) * (0.3 / np.sqrt(centres.shape[1]))
    block = centres[component] + noise * spread[component, None]
    block /= np.linalg.norm(block, axis=1, keepdims=True)
    return block


def open_bench_store(args):
    from mmcurate.retrieval.vector_store import open_store

    return open_store(Path(args.dir) / "store", ENCODER, args.dim, f"synthetic:{args.n}x{args.dim}")


def cold(store) -> None:
    """Evict the store's vector files from the page cache (``posix_fadvise`` DONTNEED, these files
    only), so exact search and re-scoring both start from disk, as on a KB larger than memory."""
    for path in store.root.glob("vectors/*.npy"):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def phase_generate(args) -> dict:
    from mmcurate.retrieval.vector_store import embed_store, write_records

    store = open_bench_store(args)
    parts = mixture(args.dim)
    started = time.perf_counter()
    write_records(store, ({"doc_id": str(i), "title": "", "text": str(i)} for i in range(args.n)))
    embed_store(store, lambda texts: draw(int(texts[0]), len(texts), parts), progress=_quiet(args), batch=BATCH)
    queries = draw(-1 % 2**32, args.queries, parts)  # a seed no store batch uses
    import numpy as np

    np.save(Path(args.dir) / "queries.npy", queries)
    return {"seconds": time.perf_counter() - started}


def phase_exact(args) -> dict:
    import faiss
    import numpy as np

    faiss.omp_set_num_threads(args.threads)
    store = open_bench_store(args)
    queries = np.load(Path(args.dir) / "queries.npy")
    cold(store)
    started = time.perf_counter()
    best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), 0), dtype=np.int64)
    for offset, chunk in store.chunks():
        scores, rows = faiss.knn(queries, chunk, min(K, len(chunk)), metric=faiss.METRIC_INNER_PRODUCT)
        best_s = np.concatenate([best_s, scores], axis=1)
        best_i = np.concatenate([best_i, rows + offset], axis=1)
        order = np.lexsort((best_i, -best_s), axis=1)[:, :K]
        best_s, best_i = np.take_along_axis(best_s, order, 1), np.take_along_axis(best_i, order, 1)
    seconds = time.perf_counter() - started
    np.save(Path(args.dir) / "truth.npy", best_i)
    return {"seconds": seconds, "qps": len(queries) / seconds}


def phase_build(args) -> dict:
    import faiss

    from mmcurate.retrieval.compressed_index import cached_compressed
    from mmcurate.retrieval.index_plan import plan_index

    faiss.omp_set_num_threads(args.threads)
    store = open_bench_store(args)
    plan = plan_index(len(store), store.dim, args.memory_gb, opq=args.variant == "opq")
    started = time.perf_counter()
    index = cached_compressed(store, plan, progress=_quiet(args))
    return {"seconds": time.perf_counter() - started, "plan": plan.describe(), "meta": index.meta}


def phase_search(args) -> dict:
    import faiss
    import numpy as np

    from mmcurate.retrieval.compressed_index import cached_compressed
    from mmcurate.retrieval.index_plan import plan_index

    faiss.omp_set_num_threads(args.threads)
    store = open_bench_store(args)
    index = cached_compressed(store, plan_index(len(store), store.dim, args.memory_gb, opq=args.variant == "opq"))
    queries = np.load(Path(args.dir) / "queries.npy")
    truth = np.load(Path(args.dir) / "truth.npy")
    cold(store)
    started = time.perf_counter()
    _, found = index.search(queries, K)
    seconds = time.perf_counter() - started
    recall = float(np.mean([len(set(t) & set(f)) / K for t, f in zip(truth.tolist(), found.tolist())]))
    return {"seconds": seconds, "qps": len(queries) / seconds, "recall": recall}


PHASES = {"generate": phase_generate, "exact": phase_exact, "build": phase_build, "search": phase_search}


def _quiet(args):
    """Progress lines to stderr, at most one every 30 s (the bench's own output stays a table)."""
    last = [0.0]

    def say(line: str) -> None:
        if time.monotonic() - last[0] >= 30 or not line.startswith(("adding", "shard")):
            last[0] = time.monotonic()
            print(f"  [{args.phase}] {line}", file=sys.stderr, flush=True)
    return say


def child(args) -> None:
    result = PHASES[args.phase](args)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    print(json.dumps(result))


def run_phase(args, phase: str, variant: str = "pq") -> dict:
    command = [sys.executable, __file__, "--phase", phase, "--variant", variant, "--n", str(args.n),
               "--dim", str(args.dim), "--queries", str(args.queries), "--memory-gb", str(args.memory_gb),
               "--threads", str(args.threads), "--dir", str(args.dir)]
    env = {**os.environ, **{name: str(args.threads) for name in THREADS_ENV}}
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=6_000_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--memory-gb", type=float, default=4.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dir", type=Path, default=Path("kb_scale_bench"))
    parser.add_argument("--keep", action="store_true", help="keep the store, queries and indexes")
    parser.add_argument("--opq", action="store_true", help="also build and search with the OPQ rotation")
    parser.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    parser.add_argument("--variant", choices=("pq", "opq"), default="pq", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        child(args)
        return
    from mmcurate.retrieval.index_plan import plan_index

    if (kind := plan_index(args.n, args.dim, args.memory_gb).kind) != "ivfpq":
        parser.error(f"{args.n:,} x {args.dim} fits --memory-gb {args.memory_gb} in memory ({kind}); "
                     "lower --memory-gb to measure the compressed index")
    args.dir.mkdir(parents=True, exist_ok=True)
    try:
        generated = run_phase(args, "generate")
        print(f"data: {args.n:,} x {args.dim} in a store of {_disk_gb(args.dir):.1f} GB, {args.queries:,} queries, "
              f"generated in {generated['seconds']:.0f}s (peak RSS {generated['peak_rss_mb']:,.0f} MB)", flush=True)
        exact = run_phase(args, "exact")
        print(f"exact (streamed faiss knn): {exact['qps']:,.2f} queries/s ({exact['seconds']:.0f}s), "
              f"peak RSS {exact['peak_rss_mb']:,.0f} MB", flush=True)
        for variant in ("pq", "opq") if args.opq else ("pq",):
            build = run_phase(args, "build", variant)
            search = run_phase(args, "search", variant)
            meta = build["meta"]
            print(f"index {meta['factory']} ({build['plan']}), nprobe {meta['params']['nprobe']}, "
                  f"candidates {meta['params']['candidates_per_result']}x", flush=True)
            print(f"  build: {build['seconds']:.0f}s, peak RSS {build['peak_rss_mb']:,.0f} MB, measured recall@10 "
                  f"{meta['recall_at_10']:.3f} on {meta['calibration_queries']} held-out rows", flush=True)
            print(f"  search: {search['qps']:,.1f} queries/s ({search['seconds']:.1f}s), peak RSS "
                  f"{search['peak_rss_mb']:,.0f} MB", flush=True)
            print(f"  recall@{K}: {search['recall']:.4f}   speed-up: {search['qps'] / exact['qps']:.1f}x   "
                  f"peak RSS build/search: {build['peak_rss_mb'] / 1024:.2f} / {search['peak_rss_mb'] / 1024:.2f} GB",
                  flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)


def _disk_gb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**30


if __name__ == "__main__":
    main()
