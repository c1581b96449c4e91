"""Vector search at mining scale: the index choose_kind picks for 1M vectors versus exact search.

Data: 1,000,000 database vectors and 1,000 queries, 512-d float32, drawn from one two-level
Gaussian mixture (5,000 components of uneven weight and spread, whose centres themselves
cluster around 200 topics, so neighbouring components overlap), then L2-normalised, like
CLIP image embeddings of a benchmark's image pool. Printed, all measured
in this run: build time of the chosen index (training, adding, nprobe calibration),
queries/s of exact search (``IndexFlatIP``) and of the index, the speed-up (index
queries/s over exact queries/s) and recall@10 against the exact top 10.

    python bench/faiss_mining.py [--n 1000000] [--queries 1000] [--dim 512]
"""

from __future__ import annotations

import argparse
import time

import faiss
import numpy as np

from mmcurate.retrieval.vector_index import build_index, choose_kind

K = 10
TOPICS = 200
COMPONENTS = 5_000
CHUNK = 100_000


def mixture(
    n: int, dim: int, centres: np.ndarray, weights: np.ndarray, spread: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """``n`` normalised draws from the mixture, generated in chunks to bound temporary memory."""
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, CHUNK):
        size = min(CHUNK, n - start)
        component = rng.choice(len(centres), size=size, p=weights)
        block = rng.standard_normal((size, dim), dtype=np.float32)
        block *= (spread[component] / np.sqrt(dim))[:, None]
        block += centres[component]
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start : start + size] = block
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    faiss.omp_set_num_threads(args.threads)
    rng = np.random.default_rng(42)

    topics = rng.standard_normal((TOPICS, args.dim)).astype(np.float32)
    topics /= np.linalg.norm(topics, axis=1, keepdims=True)
    offsets = rng.standard_normal((COMPONENTS, args.dim)).astype(np.float32) * (0.7 / np.sqrt(args.dim))
    centres = topics[rng.integers(0, TOPICS, COMPONENTS)] + offsets
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    weights = rng.dirichlet(np.full(COMPONENTS, 2.0))
    spread = rng.uniform(0.5, 1.0, COMPONENTS).astype(np.float32)  # noise norm relative to the unit centre
    t0 = time.perf_counter()
    base = mixture(args.n, args.dim, centres, weights, spread, rng)
    queries = mixture(args.queries, args.dim, centres, weights, spread, rng)
    print(
        f"data: {args.n:,} x {args.dim} database, {args.queries:,} queries, generated in {time.perf_counter() - t0:.1f}s"
    )

    kind = choose_kind(args.n)
    t0 = time.perf_counter()
    index = build_index(base, [str(i) for i in range(args.n)], kind)
    build_s = time.perf_counter() - t0
    print(f"index: kind={index.kind} params={index.params} built in {build_s:.1f}s (train + add + nprobe calibration)")

    exact = faiss.IndexFlatIP(args.dim)
    exact.add(base)
    t0 = time.perf_counter()
    _, truth = exact.search(queries, K)
    exact_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, found = index.search(queries, K)
    index_s = time.perf_counter() - t0

    recall = np.mean([len(set(t) & set(f)) / K for t, f in zip(truth.tolist(), found.tolist())])
    exact_qps, index_qps = args.queries / exact_s, args.queries / index_s
    print(f"exact (IndexFlatIP): {exact_qps:,.0f} queries/s ({exact_s:.2f}s)")
    print(f"{index.kind}: {index_qps:,.0f} queries/s ({index_s:.3f}s)")
    print(f"recall@{K}: {recall:.4f}   speed-up: {index_qps / exact_qps:.1f}x   build: {build_s:.1f}s")


if __name__ == "__main__":
    main()
