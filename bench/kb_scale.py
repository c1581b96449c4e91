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

``--real`` swaps the data for real text embedded with the configured encoder (``RetrievalConfig``'s
``text_encoder``, MiniLM offline, 384-d): the 10,033 Wikipedia summaries of ``wiki-offline``
cut into passages as DeflectionBench's mining cuts pages (``chunk_text`` with the config's
``chunk_unit``/``chunk_size``/``chunk_overlap``: 250 tokens, 32 overlap), every
``HOLD_EVERY``-th page held out of the store. Queries: the questions of the fixtures' KB-VQA
sources (InfoSeek, E-VQA, ViQuAE), then the first sentence of each held-out page's passages
until ``--queries``. ``--pages`` takes only the first pages of the KB (MiniLM embeds about 15
passages per CPU-second, so all 10,033 pages are about ten CPU-minutes). ``--n`` is then the
passage count, not an input. The store's shards are
small (``REAL_SHARD_ROWS``), so a killed run resumes its embedding (use ``--keep``).

``--scaled-plan`` (implied by ``--real``): a few thousand rows fit in memory at any budget that
admits the compressed index, so the index is the one ``plan_index`` picks for the 6M x 768 KB at
``--memory-gb`` carried to this n and dim at the same code bytes per dimension
(``index_plan.ivfpq_plan``: m = dim x m_6M / 768, nlist for this n). The synthetic mode with
``--scaled-plan --dim 384 --n <passages>`` is the side-by-side row.

Printed: peak RSS of build and search (goal <= 4 GB), recall@10 against the exact top 10
(goal >= 0.95), queries/s against exact search (goal >= 50x), build time. ``--opq`` builds
and searches both variants (without and with the OPQ rotation) on the same store, the
measurement behind ``index_plan.OPQ_DEFAULT``. The store is deleted at the end unless ``--keep``.

    nice python bench/kb_scale.py [--n 6000000] [--dim 768] [--queries 1000] [--memory-gb 4]
                                  [--threads 2] [--dir DIR] [--keep] [--opq] [--real] [--scaled-plan]
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
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported inside each phase's child process
    import numpy as np

THREADS_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
K = 10
TOPICS, COMPONENTS, SUBSPACE = 200, 5_000, 64
BATCH = 4_096
SEED = 42
ENCODER = "synthetic-mixture-v1"
PAPER_N, PAPER_DIM = 6_000_000, 768  # InfoSeek's KB: the plan --scaled-plan carries to smaller n
HOLD_EVERY = 10  # --real: every 10th wiki page stays out of the store; its passages give queries
REAL_SHARD_ROWS = 512
FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "generated"


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


def draw(first: int, size: int, parts) -> np.ndarray:
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
    from mmcurate.retrieval.vector_store import load_store, open_store

    if args.real:
        return load_store(Path(args.dir) / "store")
    return open_store(Path(args.dir) / "store", ENCODER, args.dim, f"synthetic:{args.n}x{args.dim}")


def bench_plan(args, n: int, dim: int):
    """The index the bench builds: ``plan_index``'s, or with ``--scaled-plan`` the 6M x 768 plan
    at the same code bytes per dimension (module docstring)."""
    from mmcurate.retrieval.index_plan import ivfpq_plan, plan_index

    opq = args.variant == "opq"
    if not args.scaled_plan:
        return plan_index(n, dim, args.memory_gb, opq=opq)
    paper = plan_index(PAPER_N, PAPER_DIM, args.memory_gb, opq=opq)
    return ivfpq_plan(n, dim, dim * int(paper.params["m"]) // PAPER_DIM, opq)


def fixture_questions() -> list[str]:
    """The questions of the fixtures' KB-VQA sources (InfoSeek, E-VQA, ViQuAE), deduplicated."""
    import csv

    found: list[str] = []
    for path in sorted((FIXTURES / "infoseek").glob("infoseek_*.jsonl")):
        found += _jsonl_field(path, "question")
    for path in sorted((FIXTURES / "evqa").glob("*.csv")):
        with open(path, newline="", encoding="utf-8") as handle:
            found += [row.get("question") for row in csv.DictReader(handle)]
    for path in sorted((FIXTURES / "viquae").glob("*.jsonl")):
        if path.name != "kb.jsonl":
            found += _jsonl_field(path, "input")
    return list(dict.fromkeys(q for q in found if isinstance(q, str) and q.strip()))


def _jsonl_field(path: Path, key: str) -> list:
    """``key`` of each JSON object line; the fixtures' deliberately malformed lines (their
    ingest tests' quarantine cases) are no questions and are passed over."""
    values = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        values.append(row.get(key) if isinstance(row, dict) else None)
    return values


def phase_generate_real(args) -> dict:
    import numpy as np
    import torch

    from mmcurate.benchmarks.deflectionbench import RetrievalConfig
    from mmcurate.core.text import split_sentences
    from mmcurate.retrieval.chunking import chunk_text
    from mmcurate.retrieval.encoders import text_encoder
    from mmcurate.retrieval.kb import iter_documents
    from mmcurate.retrieval.vector_store import embed_store, open_store, write_records

    torch.set_num_threads(args.threads)
    cfg = RetrievalConfig()
    started = time.perf_counter()
    passages: list[dict[str, str]] = []
    held: list[str] = []
    for number, doc in enumerate(iter_documents(cfg.kb, args.pages)):
        cut = chunk_text(doc["text"], cfg.chunk_unit, cfg.chunk_size, cfg.chunk_overlap)
        if number % HOLD_EVERY == HOLD_EVERY - 1:
            held += [split_sentences(p)[0] for p in cut if split_sentences(p)]
        else:
            passages += [{"doc_id": f"{doc['doc_id']}#{k}", "title": "", "text": p} for k, p in enumerate(cut)]
    encoder = text_encoder(cfg.text_encoder)
    source = (
        f"{cfg.kb} pages[:{args.pages}] passages ({cfg.chunk_size} {cfg.chunk_unit}, overlap {cfg.chunk_overlap}), "
        f"every {HOLD_EVERY}th page held out"
    )
    store = open_store(Path(args.dir) / "store", encoder.name, encoder.dim, source, shard_rows=REAL_SHARD_ROWS)
    write_records(store, passages)
    embed_store(store, encoder.encode_text, progress=_quiet(args), batch=256)
    questions = fixture_questions()
    texts = (questions + held)[: args.queries]
    np.save(Path(args.dir) / "queries.npy", encoder.encode_text(texts))
    return {
        "seconds": time.perf_counter() - started,
        "n": len(store),
        "dim": store.dim,
        "questions": min(len(questions), len(texts)),
        "held_out": max(0, len(texts) - len(questions)),
    }


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
    if args.real:
        return phase_generate_real(args)
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

    faiss.omp_set_num_threads(args.threads)
    store = open_bench_store(args)
    plan = bench_plan(args, len(store), store.dim)
    started = time.perf_counter()
    index = cached_compressed(store, plan, progress=_quiet(args))
    return {"seconds": time.perf_counter() - started, "plan": plan.describe(), "meta": index.meta}


def phase_search(args) -> dict:
    import faiss
    import numpy as np

    from mmcurate.retrieval.compressed_index import cached_compressed

    faiss.omp_set_num_threads(args.threads)
    store = open_bench_store(args)
    index = cached_compressed(store, bench_plan(args, len(store), store.dim))
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


SHARED_OPTIONS = ("n", "dim", "queries", "memory_gb", "threads", "dir")  # a child phase gets its parent's


def shared_options(args) -> list[str]:
    """``--n N --dim D ...``: the options every child phase is given as its parent was (this
    bench's and ``bench/peers/autofaiss_index.py``'s)."""
    return [part for name in SHARED_OPTIONS for part in (f"--{name.replace('_', '-')}", str(getattr(args, name)))]


def run_phase(args, phase: str, variant: str = "pq") -> dict:
    command = [sys.executable, __file__, "--phase", phase, "--variant", variant, *shared_options(args)]
    command += ["--real"] * args.real + ["--scaled-plan"] * args.scaled_plan
    command += ["--pages", str(args.pages)] if args.pages else []
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
    parser.add_argument("--real", action="store_true", help="real text embedded with the configured encoder")
    parser.add_argument("--pages", type=int, help="--real: only the first PAGES pages of the KB")
    parser.add_argument("--scaled-plan", action="store_true", help="the 6M x 768 plan at this n and dim")
    parser.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    parser.add_argument("--variant", choices=("pq", "opq"), default="pq", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.scaled_plan = args.scaled_plan or args.real
    if args.phase:
        child(args)
        return
    if not args.real and (kind := bench_plan(args, args.n, args.dim).kind) != "ivfpq":
        parser.error(
            f"{args.n:,} x {args.dim} fits --memory-gb {args.memory_gb} in memory ({kind}); "
            "lower --memory-gb or pass --scaled-plan to measure the compressed index"
        )
    args.dir.mkdir(parents=True, exist_ok=True)
    try:
        generated = run_phase(args, "generate")
        args.n, args.dim = generated.get("n", args.n), generated.get("dim", args.dim)
        what = (
            f"real passages, queries: {generated['questions']} fixture questions + {generated['held_out']} "
            f"held-out passages' first sentences"
            if args.real
            else f"synthetic, {args.queries:,} queries"
        )
        print(
            f"data: {args.n:,} x {args.dim} ({what}) in a store of {_disk_gb(args.dir):.1f} GB, "
            f"generated in {generated['seconds']:.0f}s (peak RSS {generated['peak_rss_mb']:,.0f} MB)",
            flush=True,
        )
        if args.scaled_plan:
            print(
                f"plan: {bench_plan(args, args.n, args.dim).describe()} (the {PAPER_N:,} x {PAPER_DIM} plan at "
                f"{args.memory_gb} GB, same code bytes per dimension)",
                flush=True,
            )
        exact = run_phase(args, "exact")
        print(
            f"exact (streamed faiss knn): {exact['qps']:,.2f} queries/s ({exact['seconds']:.0f}s), "
            f"peak RSS {exact['peak_rss_mb']:,.0f} MB",
            flush=True,
        )
        for variant in ("pq", "opq") if args.opq else ("pq",):
            build = run_phase(args, "build", variant)
            search = run_phase(args, "search", variant)
            meta = build["meta"]
            print(
                f"index {meta['factory']} ({build['plan']}), nprobe {meta['params']['nprobe']}, "
                f"candidates {meta['params']['candidates_per_result']}x",
                flush=True,
            )
            print(
                f"  build: {build['seconds']:.0f}s, peak RSS {build['peak_rss_mb']:,.0f} MB, measured recall@10 "
                f"{meta['recall_at_10']:.3f} on {meta['calibration_queries']} held-out rows",
                flush=True,
            )
            print(
                f"  search: {search['qps']:,.1f} queries/s ({search['seconds']:.1f}s), peak RSS "
                f"{search['peak_rss_mb']:,.0f} MB",
                flush=True,
            )
            print(
                f"  recall@{K}: {search['recall']:.4f}   speed-up: {search['qps'] / exact['qps']:.1f}x   "
                f"peak RSS build/search: {build['peak_rss_mb'] / 1024:.2f} / {search['peak_rss_mb'] / 1024:.2f} GB",
                flush=True,
            )
    finally:
        if not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)


def _disk_gb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**30


if __name__ == "__main__":
    main()
