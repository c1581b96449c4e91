"""Retention rates a plan multiplies through: from the paper, or measured on a release.

Per-model rates are by position in the model list (first model, second, ...), because
early elimination depends on order, not on names: of the items model ``i`` is asked about,
the share ``rates[i]`` is settled and not sent on. A plan with more models than the rates
name assumes each extra model behaves like the last one measured.

**DeflectionBench, the paper's funnel** (seed paper 003). What the text gives: about 45.9k
pooled candidates (App. D, L1077) and 2,775 released samples (Tables 2-3), 11.8 negatives
per released sample on average (Table 3), convergence after four gating models (Fig. 5).
What it does not give is the split of that 6.0% between Stage I and Stage III, nor any
per-model figure (Fig. 5's values are not in the text). Our choices, named in every plan:

- Stage III keeps ``PAPER_GOLD_PASS`` = 90% of samples through the gold check (eq. 4 drops a
  sample only when every model is INCORRECT with gold) and ``PAPER_KMIN_PASS`` = 90% of those
  through k_min; Stage I therefore keeps 2,775 / 45,900 / 0.81 = 7.5%.
- Stage I: each model drops half as many samples as the one before it (8:4:2:1 of the
  dropped samples for four models), so the curve flattens as in Fig. 5.
- Gold check: every model settles the same share of what it is asked.
- Distractors: each model leaks the same share, such that of the negatives offered
  (``planning.deflectionbench.curation.offered_negatives``: the most a source's strategy offers, at most
  ``benchmarks.deflectionbench.MAX_NEGATIVES``, Stage II's cap) 11.8 survive.
- Pre-judge: settles nothing, so every answer goes to an LLM judge (an upper bound).

**RefLVQA, the paper's funnel** (seed paper 004, §3.1): 432,817 candidate posts, 81,173
questions after the image-relevance and image-necessity filters (18.75%). The split between
the two filters is not reported: each keeps the square root (43.3%), and every inspector is
graded right with the share that makes the necessity rule keep that much. Every sentence is
taken as fact-checkable (an upper bound).

**ReflectV, the paper's funnel** (seed paper 002, App. A.2): about 35k dialogues before the
dialogue filter and the visual verification (MIRROR-Raw, L433-445), about 24k verified
multi-turn chains after them (MIRROR-1.0 and ReflectV, L37, L334, L443). The split between
the two filters is not reported (Figure 5b's values are not in the text): each keeps the
square root (82.8%). Nor is the depth of a dialogue (Figure 5c): the plan takes every built
dialogue to ``max_turns`` turns, an upper bound, unless a release measured the depth.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mmcurate.benchmarks.deflectionbench import answer_rule
from mmcurate.core.errors import MmcurateError
from mmcurate.releases.reader import LEDGER_FILE, open_release

PAPER_CANDIDATES = 45_900
PAPER_RELEASED = 2_775
PAPER_MEAN_NEGATIVES = 11.8
PAPER_GOLD_PASS = 0.90
PAPER_KMIN_PASS = 0.90
PAPER_REFLECTV_RAW = 35_000  # dialogues before filtering (MIRROR-Raw)
PAPER_REFLECTV_CHAINS = 24_000  # verified multi-turn chains after filtering (MIRROR-1.0)
PAPER_REFLVQA_POSTS = 432_817
PAPER_REFLVQA_QUESTIONS = 81_173

# the answer steps of DeflectionBench, as the call counter names them
PARAMETRIC, GOLD, DISTRACTOR = "parametric", "oracle.gold", "oracle.distractor"


@dataclass(frozen=True)
class DeflectionRates:
    """Retention of each DeflectionBench step (see the module docstring)."""

    source: str  # where the rates come from, printed with the plan
    eligible: float  # share of candidates Stage I can gate (they have answers and gold)
    stage1_drop: tuple[float, ...]  # per model: share of the samples it is asked about that it drops
    pairing: float  # share of Stage I survivors Stage II keeps
    gold_eligible: float  # share of Stage III entrants with answers and gold
    gold_settle: tuple[float, ...]  # per model: share of its gold-check samples it settles
    negatives: float | None  # negatives per sample reaching the distractor check; None: from the config
    leak: tuple[float, ...]  # per model: share of its distractors it answers CORRECT with
    kmin_pass: float  # share of gold-passing samples left with >= k_min clean negatives
    prejudge: dict[str, float] = field(default_factory=dict)  # step -> share of answers the pre-judge settles
    completion: dict[str, float] = field(default_factory=dict)  # "step/model" -> measured completion tokens per call


@dataclass(frozen=True)
class RefLVQARates:
    source: str
    relevance: float  # share of candidates the image-relevance filter keeps
    inspector_right: tuple[float, ...]  # per inspector: share of its answers graded right
    factcheckable: float  # share of sentences labelled fact-checkable
    sentences: float | None = None  # sentences per answer; None: split the sampled answers
    completion: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ReflectVRates:
    source: str
    trajectory: float  # share of dialogues the trajectory filter keeps (scores and ground truth)
    visual: float  # share of the kept dialogues that end as visually verified chains
    turns: float | None = None  # student answers per built dialogue; None: max_turns (an upper bound)


def at(rates: tuple[float, ...], index: int) -> float:
    """The rate of position ``index``; positions past the list repeat its last rate."""
    if not rates:
        return 0.0
    return rates[min(index, len(rates) - 1)]


def equal_share(total: float, models: int) -> float:
    """The per-model rate ``r`` with ``1 - (1 - r) ** models == total``."""
    return 1 - (1 - total) ** (1 / models) if models else 0.0


def halving_drops(retention: float, models: int) -> tuple[float, ...]:
    """Per-model conditional drop rates when model i drops ``2**-i`` as many samples as the first
    and all together keep ``retention``."""
    weights = [2.0**-i for i in range(models)]
    dropped = 1 - retention
    remaining, drops = 1.0, []
    for weight in weights:
        lost = dropped * weight / sum(weights)
        drops.append(lost / remaining)
        remaining -= lost
    return tuple(drops)


def paper_deflection(models: int, offered_negatives: int) -> DeflectionRates:
    """The paper's funnel spread over ``models`` gating models (see the module docstring);
    ``offered_negatives``: ``planning.deflectionbench.curation.offered_negatives``, already capped."""
    offered = offered_negatives
    stage1 = PAPER_RELEASED / PAPER_CANDIDATES / (PAPER_GOLD_PASS * PAPER_KMIN_PASS)
    survive = min(1.0, PAPER_MEAN_NEGATIVES / offered) if offered else 1.0
    return DeflectionRates(
        source=(
            f"paper funnel ({PAPER_CANDIDATES:,} -> {PAPER_RELEASED:,}; Stage I keeps {stage1:.1%}, "
            f"gold check {PAPER_GOLD_PASS:.0%}, k_min {PAPER_KMIN_PASS:.0%}: assumed split)"
        ),
        eligible=1.0,
        stage1_drop=halving_drops(stage1, models),
        pairing=1.0,
        gold_eligible=1.0,
        gold_settle=(equal_share(PAPER_GOLD_PASS, models),),
        negatives=None,
        leak=(equal_share(1 - survive, models),),
        kmin_pass=PAPER_KMIN_PASS,
    )


def keep_share(right: tuple[float, ...], inspectors: int, max_right: int) -> float:
    """Share of pairs the necessity rule keeps: at most ``max_right`` inspectors right."""
    counts = [1.0]  # counts[r] = probability of r right answers so far
    for i in range(inspectors):
        p = at(right, i)
        nxt = [0.0] * (len(counts) + 1)
        for r, share in enumerate(counts):
            nxt[r] += share * (1 - p)
            nxt[r + 1] += share * p
        counts = nxt
    return sum(counts[: max_right + 1])


def paper_reflvqa(inspectors: int, max_right: int) -> RefLVQARates:
    """The paper's funnel for ``inspectors`` inspectors (see the module docstring)."""
    each = math.sqrt(PAPER_REFLVQA_QUESTIONS / PAPER_REFLVQA_POSTS)
    low, high = 0.0, 1.0  # the right rate that keeps ``each``: keep_share falls as it grows
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if keep_share((mid,), inspectors, max_right) > each else (low, mid)
    return RefLVQARates(
        source=(
            f"paper funnel ({PAPER_REFLVQA_POSTS:,} posts -> {PAPER_REFLVQA_QUESTIONS:,} questions; "
            f"relevance and necessity keep {each:.1%} each: assumed split)"
        ),
        relevance=each,
        inspector_right=(low,) if inspectors else (),
        factcheckable=1.0,
    )


def paper_reflectv() -> ReflectVRates:
    """The paper's funnel (see the module docstring)."""
    each = math.sqrt(PAPER_REFLECTV_CHAINS / PAPER_REFLECTV_RAW)
    return ReflectVRates(
        source=(
            f"paper funnel (~{PAPER_REFLECTV_RAW:,} dialogues -> ~{PAPER_REFLECTV_CHAINS:,} verified chains; "
            f"trajectory filter and visual verification keep {each:.1%} each: assumed split)"
        ),
        trajectory=each,
        visual=each,
    )


# ---------------------------------------------------------------------------- from a release
def _release_of(path: Path | str, benchmark: str):
    release = open_release(path)
    if release.benchmark != benchmark:
        raise MmcurateError(
            f"release {path} is a {release.benchmark} release; a {benchmark} plan needs a {benchmark} release"
        )
    return release


def _open(path: Path | str, benchmark: str):
    release = _release_of(path, benchmark)
    columns = ["stage", "check", "model", "context_id", "verdict", "detail"]
    return release, pq.read_table(Path(path) / LEDGER_FILE, columns=columns)


def _share(part: int, whole: int, default: float = 1.0) -> float:
    return part / whole if whole else default


def _per_model(rows: list[dict], models: list[str], settles) -> tuple[float, ...]:
    """Per model, in pool order: the share of the rows it answered for which ``settles(verdict)``."""
    asked: Counter[str] = Counter()
    settled: Counter[str] = Counter()
    for row in rows:
        asked[row["model"]] += 1
        settled[row["model"]] += settles(row["verdict"])
    return tuple(_share(settled[m], asked[m], 0.0) for m in models if asked[m])


def _measured_completion(calls: list[dict]) -> dict[str, float]:
    """Completion tokens per call, per "step/model", where the backend reported usage."""
    out = {}
    for row in calls:
        if row.get("step") != "total" and row.get("usage_calls"):
            out[f"{row['step']}/{row['model']}"] = row["completion_tokens"] / row["usage_calls"]
    return out


def _prejudge(ledger, checks: dict[str, str]) -> dict[str, float]:
    """Per step: share of graded answers the deterministic pre-judge settled."""
    out = {}
    for check, step in checks.items():
        rows = ledger.filter(pc.and_(pc.equal(ledger["check"], check), pc.is_valid(ledger["model"])))
        if rows.num_rows:
            by_prejudge = pc.sum(pc.match_substring(rows["detail"], '"judged_by": "prejudge.')).as_py() or 0
            out[step] = by_prejudge / rows.num_rows
    return out


def release_deflection(path: Path | str, oracle_rule: str) -> DeflectionRates:
    """The rates a DeflectionBench release measured: funnel, convergence and calls from its
    manifest; gold-check, distractor, k_min and pre-judge shares from its ledger."""
    release, ledger = _open(path, "deflectionbench")
    stats = release.manifest.statistics
    try:
        funnel = [row["remaining"] for row in stats["funnel"]]
        pool = list(release.manifest.config["deflectionbench"]["gating"]["pool"])
        naive_i = next(r["naive"] for r in stats["calls"] if r["stage"] == "I" and r["step"] == "total")
    except (KeyError, StopIteration, TypeError):
        raise MmcurateError(f"release {path} has no funnel, calls and gating pool in its manifest") from None
    ingested, after_i, after_ii = funnel[0], funnel[1], funnel[2]
    gated = naive_i / len(pool)
    retained = [gated] + [r["retained"] for r in sorted(stats.get("convergence") or [], key=lambda r: r["n_models"])]
    stage1 = tuple(1 - _share(b, a) for a, b in zip(retained, retained[1:]))

    oracle = ledger.filter(pc.equal(ledger["stage"], "oracle")).select(["check", "model", "verdict"]).to_pylist()
    by_check: dict[str, list[dict]] = {}
    for row in oracle:
        by_check.setdefault(row["check"], []).append(row)
    settles = answer_rule(oracle_rule, "oracle")  # a gold-check grade that settles a sample (it is kept)
    gold = [r for r in by_check.get("oracle.gold", []) if r["model"]]
    distractor_answers = [r for r in by_check.get("oracle.distractor", []) if r["model"]]
    distractors = [r for r in by_check.get("oracle.distractor", []) if not r["model"]]
    k_min = by_check.get("oracle.k_min", [])
    preconditions = len(by_check.get("oracle.precondition", []))
    return DeflectionRates(
        source=f"release {release.benchmark} {release.version} ({Path(path)})",
        eligible=_share(gated, ingested),
        stage1_drop=stage1,
        pairing=_share(after_ii, after_i),
        gold_eligible=_share(after_ii - preconditions, after_ii),
        gold_settle=_per_model(gold, pool, settles.answered),
        negatives=_share(len(distractors), len(k_min), 0.0),
        leak=_per_model(distractor_answers, pool, lambda v: v == "CORRECT"),
        kmin_pass=_share(sum(r["verdict"] == "pass" for r in k_min), len(k_min)),
        prejudge=_prejudge(ledger, {"gate.answer": PARAMETRIC, "oracle.gold": GOLD, "oracle.distractor": DISTRACTOR}),
        completion=_measured_completion(stats.get("calls") or []),
    )


def release_reflvqa(path: Path | str) -> RefLVQARates:
    """The rates a RefLVQA release measured: relevance from its funnel, inspector and
    fact-checkable shares and sentences per answer from its ledger."""
    release, ledger = _open(path, "reflvqa")
    stats = release.manifest.statistics
    funnel = {row["stage"]: row["remaining"] for row in stats.get("funnel") or []}
    candidates = next(iter(funnel.values()), 0)
    inspectors = list(release.manifest.config["reflvqa"]["inspectors"])
    rows = (
        ledger.filter(pc.is_in(ledger["stage"], value_set=pa.array(["necessity", "factcheck"])))
        .select(["check", "model", "verdict"])
        .to_pylist()
    )
    answers = [r for r in rows if r["check"] == "necessity.inspector.v1"]
    sentences = [r for r in rows if r["check"] == "factcheck.sentence.v1"]
    labelled = sum(1 for r in rows if r["check"] == "factcheck.sample.v1")
    return RefLVQARates(
        source=f"release {release.benchmark} {release.version} ({Path(path)})",
        relevance=_share(funnel.get("relevance", candidates), candidates),
        inspector_right=_per_model(answers, inspectors, lambda v: v == "right"),
        factcheckable=_share(sum(r["verdict"] == "yes" for r in sentences), len(sentences)),
        sentences=_share(len(sentences), labelled, 0.0) or None,
        completion=_measured_completion(stats.get("calls") or []),
    )


def release_reflectv(path: Path | str) -> ReflectVRates:
    """The rates a ReflectV release measured: the filter and verification shares from its
    funnel, the turns of the dialogues it built from its ``dialogues`` config."""
    release = _release_of(path, "reflectv")
    funnel = [row.get("remaining") for row in release.manifest.statistics.get("funnel") or []]
    if len(funnel) < 4 or not all(isinstance(n, int) for n in funnel[:4]):
        raise MmcurateError(f"release {path} has no dialogue funnel in its manifest")
    original, gt_filtered, chains = funnel[0], funnel[2], funnel[3]
    dialogues = release.table("dialogues").select(["origin", "dialogue"]).to_pylist()
    built = [len(row["dialogue"]) for row in dialogues if row["origin"] == "built" and row["dialogue"]]
    return ReflectVRates(
        source=f"release {release.benchmark} {release.version} ({Path(path)})",
        trajectory=_share(gt_filtered, original),
        visual=_share(chains, gt_filtered),
        turns=sum(built) / len(built) if built else None,
    )
