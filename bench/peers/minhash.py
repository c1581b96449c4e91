"""Question near-duplicates against datasketch's MinHashLSH: the same questions, shingles, permutations,
bands and threshold, side by side.

The question pool is the curation bench's (``bench/curation_scale.py``): the questions its flow
releases from N synthetic WebQA samples, the pool mmcurate's near-duplicate stage compares (59,294
at N = 100k; 592,941 at N = 1M, "the 593k of the 1M run"). Which samples a run releases follows
from the bench's scripted models (its module docstring): Stage I drops the K- and S-codes
(``roll`` < 30), the gold check discards the facts nobody reads (``roll`` >= 93), and a sample
with 4 leaking distractors (``n % 17 == 0``) falls below ``k_min`` 5; the counts are printed
beside the bench's released figures.

Each side runs in a fresh subprocess on the same questions:

- mmcurate: ``annotation.dedup.question_pairs``, the question half of the near-duplicate stage
  (the image half has no peer here): MinHash over character 5-grams of the normalised question,
  the LSH bands ``MinHashLSH`` picks for the threshold, each candidate confirmed by the exact
  Jaccard of the two shingle sets >= ``dedup.question_threshold``;
- datasketch: ``MinHash.generator`` over the same shingles (``annotation.dedup.shingles``) and
  ``MinHashLSH(threshold, num_perm)`` (the same bands and rows), each question queried and then
  inserted, so every pair that agrees on a band is found once; its flagged pairs are the query
  answers (LSH candidates, what ``query`` returns), and then, as its docs advise "for exact
  results", those candidates filtered by the exact Jaccard of the original shingle sets (a second
  time: candidates + check).

Printed per pool: time (wall, and the process's CPU time: on a loaded machine the steadier of the two)
and peak RSS of each (``ru_maxrss`` of the process, and its growth over the RSS before the work: the
questions loaded), the ratio of times (datasketch with its exact check /
mmcurate: >= 1.0 means mmcurate ahead; the ratio against the candidates alone beside it), the
flagged pairs of each compared (counts, equal or not), and precision and recall against exact
Jaccard on a seeded sample: precision over up to ``--sample`` pairs drawn from the pairs each side
flagged, recall over every truly similar pair (Jaccard >= threshold, found exactly by prefix
filtering, not by either side's LSH) of ``--sample`` seeded anchor questions.

The default run is the 593k pool (``--sizes 1000000``) and fits 15 minutes on this 2-core machine
because datasketch's side is stopped after ``--peer-timeout`` (360 s): the pool is templated
questions (``What colour is the kite in listing N (code X)?``), so the LSH candidates grow with
the square of the pool (3.2 million at 59k, 196 million at 593k, precision about 0.0005),
and datasketch hands each one back as a Python object whose exact check is a Python set
intersection: its candidates alone take about as long as mmcurate's whole stage, the check of
them over half an hour. A stopped run prints its candidate count and time (written by the child
before the check) and a bound on the ratio. ``--sizes 100000`` (59k questions) runs both sides
to the end in a few minutes.

    python bench/peers/minhash.py [--quick] [--sizes 100000 1000000] [--sample 2000] [--peer-timeout 360]
        [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
PEER_TIMEOUT = 360.0  # seconds: the default run (the 593k pool) within 15 minutes on a quiet machine (module docstring)
sys.path[:0] = [str(REPO / "bench"), str(REPO / "bench" / "peers")]  # the benches and provenance

from curation_scale import _record
from ingest_reddit import _positive
from provenance import commit, load


def released(n: int) -> bool:
    """Whether the curation bench's flow releases sample ``n`` (module docstring)."""
    roll = (n * 7919) % 100
    return 30 <= roll < 93 and n % 17 != 0


def question_pool(samples: int) -> list[str]:
    """The released questions of a curation bench run over ``samples`` samples, in sample order."""
    return [_record(n)[1]["Q"].strip('"') for n in range(samples) if released(n)]


def _vm_rss_kb() -> int:
    return int(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmRSS:")))


def run_mmcurate(questions: list[str], threshold: float, num_perm: int) -> dict:
    import pyarrow as pa

    from mmcurate.annotation.dedup import question_pairs

    column = pa.array(questions, pa.large_string())  # as the stage holds them (``Items``)
    del questions
    before = _vm_rss_kb()
    start, cpu = time.perf_counter(), time.process_time()
    pairs = question_pairs(column, threshold, num_perm)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "cpu_seconds": time.process_time() - cpu, "before_kb": before, "pairs": pairs.keys}


def run_datasketch(questions: list[str], threshold: float, num_perm: int, work: Path) -> dict:
    from datasketch import MinHash, MinHashLSH

    from mmcurate.annotation.dedup import pair_keys, shingles

    before = _vm_rss_kb()
    start, cpu = time.perf_counter(), time.process_time()
    sets = [shingles(q) for q in questions]
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    first: list[int] = []
    second: list[int] = []
    rows = [i for i, s in enumerate(sets) if s]  # a question without shingles has nothing to compare
    for i, signature in zip(
        rows, MinHash.generator(([g.encode("utf-8") for g in sets[i]] for i in rows), num_perm=num_perm)
    ):
        for j in lsh.query(signature):  # the questions before i agreeing with it on a band
            first.append(j)
            second.append(i)
        lsh.insert(i, signature, check_duplication=False)
    candidates_seconds, candidates_cpu = time.perf_counter() - start, time.process_time() - cpu
    (work / "datasketch-candidates.json").write_text(  # what a run stopped during the check still reports
        json.dumps(
            {"candidates_seconds": candidates_seconds, "candidates_cpu_seconds": candidates_cpu, "count": len(first)}
        ),
        encoding="utf-8",
    )
    keep = [len(sets[j] & sets[i]) / len(sets[j] | sets[i]) >= threshold for j, i in zip(first, second)]
    seconds = time.perf_counter() - start
    candidates = np.sort(pair_keys(np.array(first, dtype=np.int64), np.array(second, dtype=np.int64)))
    verified = np.sort(pair_keys(np.array(first, dtype=np.int64)[keep], np.array(second, dtype=np.int64)[keep]))
    return {
        "seconds": seconds,
        "cpu_seconds": time.process_time() - cpu,
        "candidates_seconds": candidates_seconds,
        "candidates_cpu_seconds": candidates_cpu,
        "before_kb": before,
        "pairs": verified,
        "candidates": candidates,
    }


def child(side: str, pool: Path, work: Path, threshold: float, num_perm: int) -> None:
    questions = json.loads(pool.read_text(encoding="utf-8"))
    stats = (
        run_mmcurate(questions, threshold, num_perm)
        if side == "mmcurate"
        else run_datasketch(questions, threshold, num_perm, work)
    )
    for name in ("pairs", "candidates"):
        if name in stats:
            np.save(work / f"{side}-{name}.npy", stats.pop(name))
    stats["peak_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(stats))


def measured(side: str, pool: Path, work: Path, threshold: float, num_perm: int, timeout: float | None) -> dict:
    """One side's run in a fresh subprocess; when it runs past ``timeout`` seconds it is stopped and the
    answer is ``{"stopped": True}`` with datasketch's candidate figures if it got that far."""
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--child", side, str(pool), str(work), str(threshold), str(num_perm)],
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        partial = work / f"{side}-candidates.json"
        return {"stopped": True, **(json.loads(partial.read_text(encoding="utf-8")) if partial.exists() else {})}
    if done.returncode != 0:
        sys.exit(f"{side} subprocess failed:\n{done.stderr[-4000:]}")
    stats = json.loads(done.stdout.strip().splitlines()[-1])
    for name in ("pairs", "candidates"):
        if (work / f"{side}-{name}.npy").exists():
            stats[name] = np.load(work / f"{side}-{name}.npy")
    return stats


class Shingled:
    """Every question's shingles (``annotation.dedup.shingles``) as sorted integer ids, one CSR row each:
    a pool of 593k is about a hundred megabytes this way, where Python sets would take gigabytes."""

    def __init__(self, questions: list[str]) -> None:
        from scipy.sparse import csr_matrix

        from mmcurate.annotation.dedup import shingles

        vocabulary: dict[str, int] = {}
        rows = [sorted({vocabulary.setdefault(g, len(vocabulary)) for g in shingles(q)}) for q in questions]
        self.indptr = np.r_[0, np.cumsum([len(r) for r in rows])]
        self.ids = np.fromiter((i for r in rows for i in r), dtype=np.int32, count=int(self.indptr[-1]))
        self.sizes = np.diff(self.indptr)
        self.incidence = csr_matrix(
            (np.ones(len(self.ids), dtype=np.int64), self.ids, self.indptr), shape=(len(rows), len(vocabulary))
        )

    def jaccard(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        """The exact Jaccard similarity of each pair (first[k], second[k]), 65,536 pairs at a time."""
        out = np.zeros(len(first))
        for start in range(0, len(first), 1 << 16):
            i, j = first[start : start + (1 << 16)], second[start : start + (1 << 16)]
            shared = np.asarray(self.incidence[i].multiply(self.incidence[j]).sum(axis=1)).ravel()
            union = self.sizes[i] + self.sizes[j] - shared
            out[start : start + len(i)] = np.where(union > 0, shared / np.maximum(union, 1), 0.0)
        return out

    def similar(self, anchors: np.ndarray, threshold: float) -> np.ndarray:
        """Every pair (as ``pair_keys``) of an anchor and any question with Jaccard >= threshold, exactly:
        prefix filtering (Bayardo et al., "Scaling up all pairs similarity search", WWW 2007): with the
        shingles of each set ordered rarest first, two sets with Jaccard >= t share one of the first
        |A| - ceil(t |A|) + 1 of either's, so only questions sharing a prefix shingle with the anchor
        are scored."""
        from mmcurate.annotation.dedup import pair_keys

        frequency = np.bincount(self.ids)
        lengths = self.sizes
        prefix = lengths - np.ceil(threshold * lengths - 1e-9).astype(np.int64) + 1
        owner = np.repeat(np.arange(len(lengths)), lengths)
        order = np.lexsort((self.ids, frequency[self.ids], owner))  # each row rarest first
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order)) - self.indptr[owner[order]]  # a shingle's place in its row's order
        in_prefix = rank < prefix[owner]
        tokens, holders = self.ids[in_prefix], owner[in_prefix]
        by_token = np.argsort(tokens, kind="stable")
        tokens, holders = tokens[by_token], holders[by_token]
        found: list[np.ndarray] = []
        first: list[np.ndarray] = []
        second: list[np.ndarray] = []
        held = 0
        for k, a in enumerate(anchors.tolist(), 1):
            mine = np.unique(
                self.ids[self.indptr[a] : self.indptr[a + 1]][in_prefix[self.indptr[a] : self.indptr[a + 1]]]
            )
            left, right = np.searchsorted(tokens, mine), np.searchsorted(tokens, mine, side="right")
            others = np.unique(np.concatenate([holders[lo:hi] for lo, hi in zip(left, right)] or [np.zeros(0, int)]))
            others = others[others != a]
            first.append(np.minimum(others, a))
            second.append(np.maximum(others, a))
            held += len(others)
            if held >= 1 << 22 or k == len(anchors):  # candidates scored a few million at a time
                keys = np.unique(pair_keys(np.concatenate(first), np.concatenate(second)))
                found.append(keys[self.jaccard(keys >> 32, keys & 0xFFFFFFFF) >= threshold])
                first, second, held = [], [], 0
        return np.unique(np.concatenate(found or [np.zeros(0, np.int64)]))


def sample_scores(
    questions: list[str], flagged: dict[str, np.ndarray], threshold: float, size: int, seed: int
) -> dict[str, tuple[float, float, int, int]]:
    """Per side: precision over a seeded sample of ``size`` of the pairs it flagged, and recall
    over every pair with Jaccard >= threshold that involves one of ``size`` seeded anchor questions
    (found exactly, ``Shingled.similar``), both against exact Jaccard; with the number of pairs each
    rests on."""
    rng = np.random.default_rng(seed)
    shingled = Shingled(questions)
    anchors = rng.choice(len(questions), min(size, len(questions)), replace=False)
    true_pairs = shingled.similar(anchors, threshold)
    scores = {}
    for name, keys in flagged.items():
        drawn = keys[rng.choice(len(keys), min(size, len(keys)), replace=False)]
        truth = shingled.jaccard(drawn >> 32, drawn & 0xFFFFFFFF) >= threshold
        found = np.isin(true_pairs, keys)
        scores[name] = (
            float(truth.mean()) if len(drawn) else float("nan"),
            float(found.mean()) if len(found) else float("nan"),
            len(drawn),
            len(true_pairs),
        )
    return scores


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one small pool: the questions released of 10,000 samples")
    parser.add_argument(
        "--sizes",
        type=_positive,
        nargs="+",
        default=[1_000_000],
        help="curation bench sample counts whose released questions are compared",
    )
    parser.add_argument(
        "--sample",
        type=_positive,
        default=2_000,
        help="flagged pairs of the precision sample, and anchor questions of the recall sample",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the precision / recall samples")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    parser.add_argument(
        "--peer-timeout",
        type=float,
        default=PEER_TIMEOUT,
        help="seconds before datasketch's side is stopped (then only a bound on the ratio is printed)",
    )
    parser.add_argument(
        "--child", nargs=5, metavar=("SIDE", "POOL", "WORK", "THRESHOLD", "NUM_PERM"), help=argparse.SUPPRESS
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    if args.child:
        side, pool, work, threshold, num_perm = args.child
        child(side, Path(pool), Path(work), float(threshold), int(num_perm))
        return
    from datasketch import MinHashLSH

    from mmcurate.core.config import DedupConfig

    config = DedupConfig()  # the stage's defaults: the settings a release's card names
    threshold, num_perm = config.question_threshold, config.num_perm
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    sizes = [10_000] if args.quick else args.sizes
    print(
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {commit()}, load {load()}; character 5-grams, "
        f"num_perm {num_perm}, {lsh.b} bands x {lsh.r} rows, Jaccard >= {threshold}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench_peers_minhash_") as tmp:
        work = (args.keep or Path(tmp)).resolve()
        for size in sizes:
            folder = work / f"n{size}"
            folder.mkdir(parents=True, exist_ok=True)
            questions = question_pool(size)
            pool = folder / "questions.json"
            pool.write_text(json.dumps(questions), encoding="utf-8")
            ours = measured("mmcurate", pool, folder, threshold, num_perm, None)
            theirs = measured("datasketch", pool, folder, threshold, num_perm, args.peer_timeout)
            print(f"{len(questions):,} questions (released of {size:,} samples); load {load()}", flush=True)
            for name, stats in (("mmcurate question_pairs", ours), ("datasketch MinHashLSH", theirs)):
                if stats.get("stopped"):
                    got = (
                        f"its {stats['count']:,} candidates took {stats['candidates_seconds']:.1f} s (CPU "
                        f"{stats['candidates_cpu_seconds']:.1f} s: ratio against the candidates alone "
                        f"{stats['candidates_seconds'] / ours['seconds']:.2f}, in CPU time "
                        f"{stats['candidates_cpu_seconds'] / ours['cpu_seconds']:.2f}), the exact check did not end"
                        if "count" in stats
                        else "during its candidates"
                    )
                    print(
                        f"    {name:<24} stopped after --peer-timeout {args.peer_timeout:g} s, {got}: time ratio "
                        f"with the exact check > {args.peer_timeout / ours['seconds']:.2f} (wall)"
                    )
                    continue
                extra = (
                    f" (candidates alone {stats['candidates_seconds']:.1f} s, CPU "
                    f"{stats['candidates_cpu_seconds']:.1f} s)"
                    if "candidates_seconds" in stats
                    else ""
                )
                print(
                    f"    {name:<24} {stats['seconds']:7.1f} s, CPU {stats['cpu_seconds']:.1f} s{extra}; peak RSS "
                    f"{stats['peak_kb'] / 1024:.0f} MB (+{(stats['peak_kb'] - stats['before_kb']) / 1024:.0f} MB over "
                    "the questions loaded)"
                )
            flagged = {"mmcurate": ours["pairs"]}
            if theirs.get("stopped"):
                print(f"    flagged pairs: mmcurate {len(ours['pairs']):,}; datasketch's not compared (stopped)")
            else:
                same = np.array_equal(ours["pairs"], theirs["pairs"])
                extra_ours = np.setdiff1d(ours["pairs"], theirs["pairs"])
                extra_theirs = np.setdiff1d(theirs["pairs"], ours["pairs"])
                print(
                    f"    ratio {theirs['seconds'] / ours['seconds']:.2f} (datasketch with its exact check / mmcurate; "
                    f"against its candidates alone {theirs['candidates_seconds'] / ours['seconds']:.2f}); in CPU time "
                    f"{theirs['cpu_seconds'] / ours['cpu_seconds']:.2f} and "
                    f"{theirs['candidates_cpu_seconds'] / ours['cpu_seconds']:.2f}; peak RSS mmcurate / datasketch "
                    f"{ours['peak_kb'] / theirs['peak_kb']:.2f}"
                )
                print(
                    f"    flagged pairs: mmcurate {len(ours['pairs']):,}; datasketch candidates "
                    f"{len(theirs['candidates']):,}, after the exact check {len(theirs['pairs']):,}: "
                    + (
                        "equal to mmcurate's"
                        if same
                        else f"UNEQUAL (only mmcurate's {len(extra_ours)}, e.g. {[(k >> 32, k & 0xFFFFFFFF) for k in extra_ours[:3].tolist()]}; "
                        f"only datasketch's {len(extra_theirs)}, e.g. "
                        f"{[(k >> 32, k & 0xFFFFFFFF) for k in extra_theirs[:3].tolist()]})"
                    )
                )
                flagged |= {"datasketch candidates": theirs["candidates"], "datasketch + exact check": theirs["pairs"]}
            scores = sample_scores(questions, flagged, threshold, args.sample, args.seed)
            for name, (precision, recall, said, true) in scores.items():
                print(
                    f"    {name:<26} precision {precision:.4f} (of {said:,} sampled flags), recall {recall:.4f} "
                    f"(of {true:,} pairs with Jaccard >= {threshold} of the sampled anchors)"
                )
        print(f"load {load()}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")


if __name__ == "__main__":
    main()
