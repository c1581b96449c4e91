"""``VectorStore.gather`` with its ``RWF_NOWAIT`` first pass against the blocking reads alone,
side by side in one run: the same store, the same random rows per round, the two ways alternating.

A synthetic store (``kb_scale``'s mixture, ``--rows`` x ``--dim``) is written once; each round
draws ``--take`` random rows and reads them both ways (which goes first alternating), each from a cold page cache (the store's
files evicted, ``kb_scale.cold``) and then again warm. "blocking alone" is the same ``gather``
with the flag taken away (``vector_store.NOWAIT = None``: what a platform without it runs). Printed:
median seconds per way and the ratio blocking / with the pass (>= 1.0: the pass is faster).

Usage: python bench/store_gather.py [--rows 400000] [--dim 768] [--take 10000] [--rounds 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import kb_scale
import numpy as np
from ingest_reddit import _positive

from mmcurate.retrieval import vector_store

WAYS = ("with the pass", "blocking alone")


def timed_gather(store: vector_store.VectorStore, rows: np.ndarray, nowait: int | None, cache: str) -> float:
    vector_store.NOWAIT = nowait
    if cache == "cold":
        kb_scale.cold(store)
    started = time.perf_counter()
    store.gather(rows)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=_positive, default=400_000)
    parser.add_argument("--dim", type=_positive, default=768)
    parser.add_argument("--take", type=_positive, default=10_000, help="random rows read per round")
    parser.add_argument("--rounds", type=_positive, default=5)
    parser.add_argument("--keep", type=Path, help="write the store here and keep it (default: a temporary folder)")
    args = parser.parse_args()
    nowait = vector_store.NOWAIT
    if nowait is None:
        raise SystemExit(
            "store_gather: this platform has no os.RWF_NOWAIT: gather reads blocking only, nothing to compare"
        )
    folder = args.keep or Path(tempfile.mkdtemp(prefix="store-gather-"))
    print(f"load {os.getloadavg()[0]:.2f}; {args.rows:,} x {args.dim} store, {args.take:,} random rows a round")
    try:
        store_args = argparse.Namespace(real=False, n=args.rows, dim=args.dim, queries=1, dir=folder, phase="generate")
        if not (folder / "store").is_dir():
            kb_scale.phase_generate(store_args)
        store = kb_scale.open_bench_store(store_args)
        rng = np.random.default_rng(0)
        seconds: dict[tuple[str, str], list[float]] = {}
        for round_ in range(args.rounds):
            rows = rng.integers(0, len(store), args.take)
            ways = list(zip(WAYS, (nowait, None), strict=True))
            for way, flag in ways if round_ % 2 == 0 else ways[::-1]:  # each way first every other round
                for cache in ("cold", "warm"):
                    seconds.setdefault((way, cache), []).append(timed_gather(store, rows, flag, cache))
        for cache in ("cold", "warm"):
            passed, blocking = (statistics.median(seconds[(way, cache)]) for way in WAYS)
            print(
                f"{cache}: with the pass {passed:.3f} s, blocking alone {blocking:.3f} s (medians of {args.rounds}): "
                f"ratio {blocking / passed:.2f}"
            )
    finally:
        vector_store.NOWAIT = nowait
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"load {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
