"""The knowledge-base index against autofaiss: the same vectors, the same memory budget.

Data, queries and ground truth are ``bench/kb_scale.py``'s, through its own phases (each a child
process, so each peak RSS is its own): ``--data real`` is its ``--real`` mode (the wiki-offline
passages embedded with MiniLM, questions and held-out sentences as queries; ``--pages`` takes the
first pages), ``--data synthetic`` its clustered mixture at ``--n`` x ``--dim``. Its ``exact``
phase gives the exact top 10 of every query (streamed ``faiss.knn``), the truth both sides are
scored against.

- mmcurate: ``kb_scale``'s ``build`` and ``search`` phases: the index ``plan_index`` picks for
  the KB at ``--memory-gb`` (IVF-PQ, candidates re-scored exactly from the on-disk store,
  nprobe calibrated to recall 0.97 on held-out rows). A KB that fits memory at the budget gets a
  flat or IVF index from ``plan_index``, with nothing compressed to compare; so on ``--data real``,
  with ``--scaled-plan``, and whenever the plan is not IVF-PQ (the output says so), the index is
  the 6M x 768 plan at the same code bytes per dimension, as ``kb_scale --real`` builds it.
- autofaiss: ``autofaiss.build_index`` over the store's own vector files (the ``.npy`` shards,
  read in name order, i.e. row order) with the same budget (``--peer-budget``), inner product,
  the same threads; it picks the index and its search parameters (``index_param``), which the
  search phase sets with ``faiss.ParameterSpace``. Its build is stopped after ``--peer-timeout``
  seconds (then only a bound on the build time is printed). ``--peer-index plan`` gives it
  mmcurate's index instead (``index_key``), in the form autofaiss builds for inner product
  (``Pad<d>,IVF<nlist>_HNSW32,PQ<m>x8``: the same IVF-PQ, its coarse centroids searched by HNSW,
  no exact re-scoring), still tuned by autofaiss; the output names autofaiss's own pick beside it.
  At 1M x 768 and 4 GB its pick is HNSW32 over the raw vectors, whose build on this 2-core machine
  would take over an hour by our estimate (30k x 768 alone took 108 s), so that size runs with ``plan``.

Equal recall: mmcurate's nprobe is calibrated to recall@10 0.97 on held-out rows
(``compressed_index.CALIBRATION_RECALL``), autofaiss tunes to a query time, so their recalls
differ. So mmcurate's index is searched again at autofaiss's recall on the bench's queries
(``equal-recall`` phase): when autofaiss's is higher, with nprobe raised a quarter at a time and, at
every list, the candidates re-scored per result raised by half at a time (up to
``MAX_CANDIDATES_PER_RESULT``) until it is reached; when it is lower, with the candidates halved and
then nprobe lowered while recall stays at or above it (the cheapest setting that holds it). That
row (``queries/s, nprobe N, C per result``) is the queries/s ratio at equal recall.

autofaiss's ``current_memory_available`` is ``--memory-gb`` (mmcurate's ``retrieval.memory_gb``:
the memory building and searching may use). Its ``max_index_memory_usage`` (``--peer-budget``):
``memory`` (default: what a user of either tool sets) 90% of it, the largest index autofaiss
agrees to build in that memory (it refuses when less than 10% would be left over); ``index``
the bytes mmcurate's index keeps resident (PQ codes, ids, coarse centroids), so both compress as
much. mmcurate's store on disk is not counted either way.

autofaiss 2.18 passes ``M=`` and ``d2=`` to ``faiss.OPQMatrix`` as keywords, which the bindings
of faiss 1.15 do not accept; the peer's child process passes them positionally (the same call).
Its own saving (``save_on_disk``) fails under numpy 2 (``json.dump`` of a float32 metric), so
the bench takes the built index from ``build_index`` and writes it with ``faiss.write_index``
(after the timed build).

The default run (real: the whole wiki-offline KB; synthetic: 100k x 384) takes about 16 CPU-minutes,
most of it MiniLM embedding the KB: within 15 minutes on a quiet 2-core machine (38 minutes at load
5-9). 1M x 768 is its own command (``--data synthetic --n 1000000 --dim 768 --peer-index plan``).

Printed per data set: recall@10 against exact search, queries/s (the queries in one batch),
build time and peak RSS of build and search, each as mmcurate / autofaiss and the ratio
(>= 1.0: mmcurate ahead; for build time, RSS: peer / mmcurate), with the date, commit and load.

    python bench/peers/autofaiss_index.py [--quick] [--data real synthetic] [--n 100000] [--dim 384]
        [--pages N] [--memory-gb 4] [--peer-budget memory|index] [--peer-index auto|plan]
        [--peer-timeout 600] [--dir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]  # bench/, provenance

import kb_scale
from provenance import stamp

K = kb_scale.K
BUDGETS = ("memory", "index")
MAX_CANDIDATES_PER_RESULT = 100  # the equal-recall sweep's last setting: 1,000 vectors re-scored for a top 10


def kb_args(args: argparse.Namespace, data: str) -> argparse.Namespace:
    """The namespace ``kb_scale.run_phase`` takes, for one data set in its own folder."""
    real = data == "real"
    return argparse.Namespace(
        n=args.n,
        dim=args.dim,
        queries=args.queries,
        memory_gb=args.memory_gb,
        threads=args.threads,
        dir=args.dir / data,
        real=real,
        scaled_plan=real or args.scaled_plan,
        pages=args.pages if real else None,
        variant="pq",
    )


def peer_budget_bytes(args: argparse.Namespace, n: int, dim: int) -> int:
    """autofaiss's ``max_index_memory_usage`` in bytes (module docstring, ``--peer-budget``)."""
    if args.peer_budget == "memory":
        return int(args.memory_gb * 1024) * 9 // 10 * 2**20
    plan = kb_scale.bench_plan(kb_args(args, args.data_name), n, dim)
    params = plan.params
    return n * (int(params["m"]) + 8) + int(params["nlist"]) * dim * 4  # index_plan.ivfpq_bytes without the working set


def peer_plan_key(dim: int, params: dict) -> str:
    """mmcurate's IVF-PQ plan as an autofaiss ``index_key``: autofaiss builds inner-product IVF-PQ only
    in its own forms (``indices/index_factory.py`` refuses ``IVFn,PQm``), of which ``Pad<d>,IVF<n>_HNSW32,
    PQ<m>x<b>`` is the same index without a rotation (its coarse centroids searched by HNSW)."""
    return f"Pad{dim},IVF{params['nlist']}_HNSW32,PQ{params['m']}x{params['nbits']}"


def _opq_keywords() -> None:
    """autofaiss 2.18 calls ``faiss.OPQMatrix(d, M=.., d2=..)``; faiss 1.15 takes them positionally."""
    import faiss

    positional = faiss.OPQMatrix
    faiss.OPQMatrix = lambda d, M=1, d2=-1: positional(d, M, d2)


def phase_peer_build(args: argparse.Namespace) -> dict:
    _opq_keywords()
    import faiss
    from autofaiss import build_index

    kb = kb_args(args, args.data_name)
    store = kb_scale.open_bench_store(kb)
    folder = args.dir / args.data_name / "autofaiss"
    folder.mkdir(parents=True, exist_ok=True)
    budget = peer_budget_bytes(args, len(store), store.dim)
    plan = kb_scale.bench_plan(kb, len(store), store.dim)
    started = time.perf_counter()
    index, infos = build_index(
        embeddings=str(store.root / "vectors"),
        save_on_disk=False,
        file_format="npy",
        index_key=peer_plan_key(store.dim, plan.params) if args.peer_index == "plan" else None,
        max_index_memory_usage=f"{max(budget // 2**20, 1)}M",
        current_memory_available=f"{max(int(args.memory_gb * 1024), 1)}M",
        metric_type="ip",
        nb_cores=args.threads,
        verbose=logging.WARNING,
    )
    seconds = time.perf_counter() - started
    if index is None or infos is None:
        raise SystemExit("autofaiss did not build an index (its error is above)")
    faiss.write_index(index, str(folder / "knn.index"))
    (folder / "infos.json").write_text(json.dumps(infos, default=float), encoding="utf-8")
    return {
        "seconds": seconds,
        "budget_mb": budget / 2**20,
        "index_key": infos["index_key"],
        "index_param": infos["index_param"],
    }


def phase_peer_search(args: argparse.Namespace) -> dict:
    import faiss
    import numpy as np

    faiss.omp_set_num_threads(args.threads)
    folder = args.dir / args.data_name
    infos = json.loads((folder / "autofaiss" / "infos.json").read_text(encoding="utf-8"))
    index = faiss.read_index(str(folder / "autofaiss" / "knn.index"))
    faiss.ParameterSpace().set_index_parameters(index, infos["index_param"])
    queries = np.load(folder / "queries.npy")
    truth = np.load(folder / "truth.npy")
    started = time.perf_counter()
    _, found = index.search(queries, K)
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "qps": len(queries) / seconds,
        "recall": recall_at_k(truth, found),
        "index_bytes": (folder / "autofaiss" / "knn.index").stat().st_size,
    }


def recall_at_k(truth, found) -> float:
    """Mean share of each query's exact top ``K`` among its ``K`` found rows (as ``kb_scale``'s search)."""
    return sum(len(set(t) & set(f)) / K for t, f in zip(truth.tolist(), found.tolist())) / len(truth)


def phase_equal_recall(args: argparse.Namespace) -> dict:
    """mmcurate's built index at ``--target-recall`` (autofaiss's), each search from a cold page cache
    as ``kb_scale``'s search phase. Below the target at its calibrated setting: nprobe raised a quarter
    at a time until recall@10 on the bench's queries reaches it or nprobe reaches nlist, then the
    candidates re-scored per result (``candidates_per_result``, the plan's other recall knob) raised by
    half at a time up to ``MAX_CANDIDATES_PER_RESULT``. Above it: the candidates per result halved
    (down to 1), then nprobe lowered a quarter at a time, while recall stays at or above the target;
    the last setting that holds it is the row. The queries choose the setting here (a recall /
    queries-per-second curve, as ANN benchmarks draw them), so this row compares speed at equal
    recall, not the calibration that ships."""
    import faiss
    import numpy as np

    from mmcurate.retrieval.compressed_index import cached_compressed

    faiss.omp_set_num_threads(args.threads)
    kb = kb_args(args, args.data_name)
    store = kb_scale.open_bench_store(kb)
    index = cached_compressed(store, kb_scale.bench_plan(kb, len(store), store.dim))
    queries = np.load(kb.dir / "queries.npy")
    truth = np.load(kb.dir / "truth.npy")
    nlist = int(index.params["nlist"])

    def measured() -> dict:
        kb_scale.cold(store)
        started = time.perf_counter()
        _, found = index.search(queries, K)
        seconds = time.perf_counter() - started
        return {
            "nprobe": int(index.params["nprobe"]),
            "nlist": nlist,
            "candidates_per_result": int(index.params["candidates_per_result"]),
            "recall": recall_at_k(truth, found),
            "qps": len(queries) / seconds,
        }

    point = measured()
    if point["recall"] < args.target_recall:
        while point["recall"] < args.target_recall and point["candidates_per_result"] < MAX_CANDIDATES_PER_RESULT:
            if point["nprobe"] < nlist:
                index.set_nprobe(min(nlist, point["nprobe"] + max(1, point["nprobe"] // 4)))
            else:
                candidates = point["candidates_per_result"]
                index.set_candidates_per_result(min(MAX_CANDIDATES_PER_RESULT, candidates + max(1, candidates // 2)))
            point = measured()
        return point
    while point["candidates_per_result"] > 1 or point["nprobe"] > 1:
        if point["candidates_per_result"] > 1:
            index.set_candidates_per_result(point["candidates_per_result"] // 2)
        else:
            index.set_nprobe(point["nprobe"] - max(1, point["nprobe"] // 4))
        cheaper = measured()
        if cheaper["recall"] < args.target_recall:
            break
        point = cheaper
    return point


PHASES = {"peer-build": phase_peer_build, "peer-search": phase_peer_search, "equal-recall": phase_equal_recall}


def run_peer(args: argparse.Namespace, data: str, phase: str, *extra: str) -> dict | None:
    """One phase of this bench (``PHASES``) in a child process; None when it ran past ``--peer-timeout``."""
    command = [
        sys.executable,
        __file__,
        "--phase",
        phase,
        "--data-name",
        data,
        *kb_scale.shared_options(args),
        "--peer-budget",
        args.peer_budget,
        "--peer-index",
        args.peer_index,
        *extra,
    ]
    command += ["--scaled-plan"] * args.scaled_plan + (["--pages", str(args.pages)] if args.pages else [])
    env = {**os.environ, "TQDM_DISABLE": "1", **{name: str(args.threads) for name in kb_scale.THREADS_ENV}}
    try:
        done = subprocess.run(
            command, stdout=subprocess.PIPE, text=True, env=env, check=True, timeout=args.peer_timeout
        )
    except subprocess.TimeoutExpired:
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(args: argparse.Namespace, data: str) -> None:
    """Both sides on one data set, printed as they finish."""
    kb = kb_args(args, data)
    kb.dir.mkdir(parents=True, exist_ok=True)
    generated = kb_scale.run_phase(kb, "generate")
    kb.n, kb.dim = generated.get("n", kb.n), generated.get("dim", kb.dim)
    plan = kb_scale.bench_plan(kb, kb.n, kb.dim)
    fits = "" if plan.kind == "ivfpq" else plan.kind
    if fits:  # the compressed index is what is compared: the 6M x 768 plan at this n and dim
        kb.scaled_plan = args.scaled_plan = True
        plan = kb_scale.bench_plan(kb, kb.n, kb.dim)
    what = (
        f"real MiniLM passages, {generated['questions']} fixture questions + {generated['held_out']} held-out "
        f"first sentences as queries"
        if kb.real
        else f"synthetic mixture, {args.queries:,} queries"
    )
    print(f"\n[{data}] {kb.n:,} x {kb.dim} {what}; generated in {generated['seconds']:.0f}s", flush=True)
    if fits:
        print(
            f"  {kb.n:,} x {kb.dim} fits --memory-gb {args.memory_gb} in memory (plan_index: {fits}); the "
            "index compared is the 6M x 768 plan at this n and dim (--scaled-plan)",
            flush=True,
        )
    exact = kb_scale.run_phase(kb, "exact")
    print(f"  exact search (the truth): {exact['qps']:,.1f} queries/s", flush=True)
    for kept in (kb.dir / "store").glob("index-*"):  # a kept store's index would be loaded, not built
        shutil.rmtree(kept)
    build = kb_scale.run_phase(kb, "build")
    search = kb_scale.run_phase(kb, "search")
    print(
        f"  mmcurate: {build['meta']['factory']}, nprobe {build['meta']['params']['nprobe']}, {plan.describe()}",
        flush=True,
    )
    if args.peer_index == "plan":
        from autofaiss.external.optimize import get_optimal_index_keys_v2

        budget = peer_budget_bytes(args, kb.n, kb.dim)
        print(
            f"  autofaiss is given mmcurate's index (--peer-index plan, index_key {peer_plan_key(kb.dim, plan.params)}); "
            f"its own pick at max_index_memory_usage {budget / 2**20:,.0f} MB would be "
            f"{get_optimal_index_keys_v2(kb.n, kb.dim, f'{budget // 2**20}M')[0]}",
            flush=True,
        )
    peer_build = run_peer(args, data, "peer-build")
    if peer_build is None:
        print(
            f"  autofaiss: build stopped after --peer-timeout {args.peer_timeout:.0f}s "
            f"(mmcurate built in {build['seconds']:.0f}s: build-time ratio > {args.peer_timeout / build['seconds']:.2f})",
            flush=True,
        )
        return
    peer_search = run_peer(args, data, "peer-search")
    print(
        f"  autofaiss: {peer_build['index_key']} ({peer_build['index_param']}), max_index_memory_usage "
        f"{peer_build['budget_mb']:,.0f} MB (--peer-budget {args.peer_budget}), index file "
        f"{peer_search['index_bytes'] / 2**20:,.1f} MB",
        flush=True,
    )
    rows = [
        (
            "recall@10 vs exact",
            search["recall"],
            peer_search["recall"],
            search["recall"] / peer_search["recall"],
            "{:.4f}",
        ),
        ("queries/s", search["qps"], peer_search["qps"], search["qps"] / peer_search["qps"], "{:,.1f}"),
        ("build s", build["seconds"], peer_build["seconds"], peer_build["seconds"] / build["seconds"], "{:,.1f}"),
        (
            "peak RSS build MB",
            build["peak_rss_mb"],
            peer_build["peak_rss_mb"],
            peer_build["peak_rss_mb"] / build["peak_rss_mb"],
            "{:,.0f}",
        ),
        (
            "peak RSS search MB",
            search["peak_rss_mb"],
            peer_search["peak_rss_mb"],
            peer_search["peak_rss_mb"] / search["peak_rss_mb"],
            "{:,.0f}",
        ),
    ]
    if search["recall"] != peer_search["recall"]:
        equal = run_peer(args, data, "equal-recall", "--target-recall", repr(peer_search["recall"]))
        assert equal is not None  # searches only: well inside --peer-timeout
        setting = f"nprobe {equal['nprobe']}, {equal['candidates_per_result']} per result"
        rows.insert(
            2,
            (f"queries/s, {setting}", equal["qps"], peer_search["qps"], equal["qps"] / peer_search["qps"], "{:,.1f}"),
        )
        side = "below" if search["recall"] < peer_search["recall"] else "above"
        reached = "reaches" if equal["recall"] >= peer_search["recall"] else "stays below"
        print(
            f"  mmcurate's calibrated setting (nprobe {build['meta']['params']['nprobe']}) is {side} autofaiss's "
            f"recall; at nprobe {equal['nprobe']} of {equal['nlist']} re-scoring {equal['candidates_per_result']} "
            f"candidates per result it {reached} it: recall@10 {equal['recall']:.4f} (chosen on these queries; the "
            "row 'queries/s, nprobe N, C per result' is the equal-recall comparison)",
            flush=True,
        )
    print(f"  {'':24} {'mmcurate':>12} {'autofaiss':>12} {'ratio':>7}")
    for name, mine, peer, ratio, form in rows:
        print(f"  {name:24} {form.format(mine):>12} {form.format(peer):>12} {ratio:7.3f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="real: 300 pages; synthetic: 20,000 x 384, scaled plan")
    parser.add_argument("--data", nargs="+", choices=("real", "synthetic"), default=["real", "synthetic"])
    parser.add_argument("--n", type=int, default=100_000, help="synthetic rows")
    parser.add_argument("--dim", type=int, default=384, help="synthetic dimension")
    parser.add_argument("--pages", type=int, help="real: only the first PAGES wiki pages")
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--memory-gb", type=float, default=4.0)
    parser.add_argument("--peer-budget", choices=BUDGETS, default="memory")
    parser.add_argument(
        "--peer-index",
        choices=("auto", "plan"),
        default="auto",
        help="auto: autofaiss picks its index for the budget; plan: it builds mmcurate's plan's index (index_key)",
    )
    parser.add_argument("--peer-timeout", type=float, default=600.0, help="seconds before autofaiss's build is stopped")
    parser.add_argument("--scaled-plan", action="store_true", help="synthetic: the 6M x 768 plan at this n and dim")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dir", type=Path, default=Path("autofaiss_bench"))
    parser.add_argument("--keep", action="store_true", help="keep the stores, queries and indexes")
    parser.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    parser.add_argument("--data-name", choices=("real", "synthetic"), help=argparse.SUPPRESS)
    parser.add_argument("--target-recall", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.pages, args.n, args.dim, args.scaled_plan = args.pages or 300, 20_000, 384, True
    if min(args.n, args.dim, args.queries, args.threads) < 1 or args.memory_gb <= 0 or args.peer_timeout <= 0:
        parser.error("--n, --dim, --queries, --threads must be at least 1; --memory-gb and --peer-timeout above 0")
    args.dir = args.dir.resolve()
    if args.phase:
        result = PHASES[args.phase](args)
        result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
        print(json.dumps(result))
        return
    print(stamp("start"), flush=True)
    try:
        for data in args.data:
            args.data_name = data
            compare(args, data)
    finally:
        if not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)
    print(stamp("end"), flush=True)


if __name__ == "__main__":
    main()
