"""Two evaluation runs of one release, compared item by item (Kestrel, seed 000: the four
transitions of Fig. 4, preference shares with 95% Wilson intervals of Fig. 6).

A run is a folder as ``mmcurate evaluate`` writes it: ``answers.parquet`` (one row per answer:
``sample_id``, its grade and the columns that say under which condition it was asked:
DeflectionBench's ``scenario``, ``n_negatives``, ...; POPE's ``split``; CRAG-MM's ``task`` and
``variant``) and ``table.md``,
whose title ``# <model> on <benchmark> <version> (...)`` names the release evaluated, and
``release.json`` its content id. Runs of different releases are not compared, nor runs of two
releases that share a name but not their content (matched by content id where both runs
recorded it).

An item is one question asked under one condition: the rows are matched on ``sample_id`` and
those of ``scenario``, ``n_negatives``, ``negatives``, ``abstention``, ``dataset``, ``split`` and
``task``, ``variant`` that both runs have; transitions are also counted per ``scenario``, or per POPE
``dataset`` and ``split`` (Kestrel reports each of COCO, A-OKVQA and GQA by split: its
datasets are never pooled into one split's row), or per ``split``, or per CRAG-MM ``variant``
(CRUISE and each ablation). The grade is ``grade`` (the SimpleQA rubric): an answer is correct
when it is CORRECT; INCORRECT and NOT_ATTEMPTED are both "not correct"; items where either run
has no grade (FAILED, JUDGE_ERROR) are left out and counted. CRAG-MM rows carry ``crag_grade``
instead (``evaluation.crag``, after the run's multi-turn rule, as its tables read it): correct
is perfect or acceptable (CRAG's accuracy), missing and incorrect are not correct, and failed,
timed-out and judge-error turns are left out and counted. From run A to run B each item is

- kept correct (correct in both), corrected (wrong in A, correct in B),
- broken (correct in A, wrong in B), kept wrong (wrong in both);

and the win shares over the n compared items are B better (= corrected), A better
(= broken) and tie (kept correct + kept wrong), each with its 95% Wilson score interval, plus
B's share of the decided items (corrected / (corrected + broken)).

Wilson interval of k successes in n trials at 95% (statsmodels' ``proportion_confint``,
method ``wilson``; z = 1.959964, two-sided):

    centre = (p + z^2 / 2n) / (1 + z^2 / n)
    half   = z * sqrt(p (1 - p) / n + z^2 / 4n^2) / (1 + z^2 / n)

e.g. 41 of 60 -> [0.558, 0.787] (Kestrel's human-preference share for its method).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mmcurate.core.errors import MmcurateError
from mmcurate.core.markdown import markdown_table
from mmcurate.core.plural import counted

from .crag import FAILED, JUDGE_ERROR, TIMED_OUT
from .cragmm.report import CORRECT as CRAG_CORRECT
from .run_record import recorded_content_id

ALPHA = 0.05  # 95% intervals
ANSWERS = "answers.parquet"
TITLE_FILE = "table.md"
CONDITIONS = (
    "scenario",
    "n_negatives",
    "negatives",
    "abstention",
    "dataset",
    "split",
    "task",
    "variant",
)  # matched when both runs have them
GROUPS = (("scenario",), ("dataset", "split"), ("split",), ("variant",))  # transitions per the first the runs share


@dataclass(frozen=True)
class Grading:
    """How a run's rows are graded: the grade column, the grades that are correct and those that
    are no grade (the item is left out)."""

    column: str
    correct: tuple[str, ...]
    ungraded: tuple[str, ...]


GRADINGS = (
    Grading("grade", ("CORRECT",), ("FAILED", "JUDGE_ERROR")),  # the SimpleQA rubric
    Grading("crag_grade", CRAG_CORRECT, (FAILED, TIMED_OUT, JUDGE_ERROR)),
)  # CRAG-MM (evaluation.crag)
TRANSITIONS = ("kept correct", "corrected", "broken", "kept wrong")
_TITLE = re.compile(r"^# .+ on (\S+) (\S+) \(.*\)\s*$")


class CompareError(MmcurateError):
    """Two runs that cannot be compared, or a folder that is not an evaluation run."""


def wilson(k: int, n: int, alpha: float = ALPHA) -> tuple[float, float] | None:
    """The two-sided Wilson score interval of k successes in n trials at level 1 - alpha
    (None for n = 0)."""
    if not 0 <= k <= n:
        raise ValueError(f"wilson needs 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return None
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(k, n, alpha=alpha, method="wilson")
    return float(low), float(high)


@dataclass(frozen=True)
class Run:
    folder: Path
    benchmark: str
    version: str
    answers: pa.Table
    grading: Grading
    content_id: str | None = None  # from ``release.json`` (``evaluation.run_record``); None: an older run

    @property
    def release(self) -> str:
        return f"{self.benchmark} {self.version}"


def read_run(folder: Path | str) -> Run:
    """An evaluation run folder: its answers and the release its title names."""
    folder = Path(folder)
    if not (folder / ANSWERS).is_file():
        raise CompareError(f"{folder} is not an evaluation run: no {ANSWERS}")
    title = folder / TITLE_FILE
    first = title.read_text(encoding="utf-8").splitlines()[0] if title.is_file() else ""
    match = _TITLE.match(first)
    if match is None:
        raise CompareError(
            f"cannot tell which release {folder} evaluated: {title} has no "
            "'# <model> on <benchmark> <version> (...)' title"
        )
    try:
        answers = pq.read_table(folder / ANSWERS)
    except Exception as exc:  # pyarrow raises several types for unreadable files
        raise CompareError(f"{folder / ANSWERS}: not a readable Parquet file: {str(exc).splitlines()[0]}") from None
    if "sample_id" not in answers.column_names:
        raise CompareError(f"{folder / ANSWERS} lacks the column sample_id")
    grading = next((g for g in GRADINGS if g.column in answers.column_names), None)
    if grading is None:
        raise CompareError(f"{folder / ANSWERS} has no grade column (one of {', '.join(g.column for g in GRADINGS)})")
    return Run(folder, match.group(1), match.group(2), answers, grading, recorded_content_id(folder))


def _items(run: Run, key: list[str]) -> dict[tuple, str]:
    columns = [run.answers.column(c).to_pylist() for c in key]
    grades = run.answers.column(run.grading.column).to_pylist()
    out: dict[tuple, str] = {}
    for n, grade in enumerate(grades):
        item = tuple(col[n] for col in columns)
        if item in out:
            raise CompareError(f"{run.folder} holds two answers for one item {dict(zip(key, item))}")
        out[item] = grade
    return out


@dataclass(frozen=True)
class Comparison:
    release: str
    a: Path
    b: Path
    key: list[str]
    compared: int
    left_out: int  # items where a run has no grade (``Grading.ungraded``)
    only_in_a: int
    only_in_b: int
    transitions: pa.Table  # scenario (the group: scenario or split, "all" first), transition, count, share
    wins: pa.Table  # outcome, count, n, share, low, high


def _group_columns(key: list[str]) -> tuple[str, ...]:
    """The columns transitions are counted by: the first of ``GROUPS`` the runs share, or none."""
    return next((group for group in GROUPS if all(c in key for c in group)), ())


def _group(item: tuple, key: list[str], by: tuple[str, ...]) -> str:
    return " / ".join(str(item[key.index(c)]) for c in by)


def _transition(a_correct: bool, b_correct: bool) -> str:
    if a_correct:
        return "kept correct" if b_correct else "broken"
    return "corrected" if b_correct else "kept wrong"


def compare_runs(a: Path | str, b: Path | str) -> Comparison:
    """Compare run ``a`` with run ``b`` item by item (see the module docstring)."""
    run_a, run_b = read_run(a), read_run(b)
    if run_a.release != run_b.release:
        raise CompareError(
            f"the runs evaluate different releases: {run_a.release} ({run_a.folder}) and "
            f"{run_b.release} ({run_b.folder})"
        )
    if run_a.content_id is not None and run_b.content_id is not None and run_a.content_id != run_b.content_id:
        raise CompareError(
            f"the runs evaluate two different releases named {run_a.release}: content "
            f"{run_a.content_id[:12]} ({run_a.folder}) and {run_b.content_id[:12]} ({run_b.folder})"
        )
    if run_a.grading != run_b.grading:
        raise CompareError(
            f"the runs are graded differently: {run_a.grading.column} ({run_a.folder}) and "
            f"{run_b.grading.column} ({run_b.folder})"
        )
    grading = run_a.grading
    key = ["sample_id", *(c for c in CONDITIONS if c in run_a.answers.column_names and c in run_b.answers.column_names)]
    items_a, items_b = _items(run_a, key), _items(run_b, key)
    common = [item for item in items_a if item in items_b]
    if not common:
        raise CompareError(f"the runs {run_a.folder} and {run_b.folder} share no item (matched on {', '.join(key)})")
    graded = [i for i in common if items_a[i] not in grading.ungraded and items_b[i] not in grading.ungraded]
    if not graded:
        raise CompareError(f"the runs share {counted(len(common), 'item')} but none is graded in both")
    by = _group_columns(key)
    counts: Counter[tuple[str, str]] = Counter()
    for item in graded:
        moved = _transition(items_a[item] in grading.correct, items_b[item] in grading.correct)
        counts[("all", moved)] += 1
        if by:
            counts[(_group(item, key, by), moved)] += 1
    groups = ["all", *sorted({_group(item, key, by) for item in graded} if by else [])]
    rows = []
    for group in groups:
        total = sum(counts[(group, t)] for t in TRANSITIONS)
        rows += [
            {"scenario": group, "transition": t, "count": counts[(group, t)], "share": counts[(group, t)] / total}
            for t in TRANSITIONS
        ]
    n = len(graded)
    corrected, broken = counts[("all", "corrected")], counts[("all", "broken")]
    wins = []
    for outcome, k, trials in (
        ("B better", corrected, n),
        ("A better", broken, n),
        ("tie", n - corrected - broken, n),
        ("B preferred among decided", corrected, corrected + broken),
    ):
        interval = wilson(k, trials)
        wins.append(
            {
                "outcome": outcome,
                "count": k,
                "n": trials,
                "share": k / trials if trials else None,
                "low": interval[0] if interval else None,
                "high": interval[1] if interval else None,
            }
        )
    return Comparison(
        release=run_a.release,
        a=run_a.folder,
        b=run_b.folder,
        key=key,
        compared=n,
        left_out=len(common) - n,
        only_in_a=len(items_a) - len(common),
        only_in_b=len(items_b) - len(common),
        transitions=pa.Table.from_pylist(rows),
        wins=pa.Table.from_pylist(
            wins,
            schema=pa.schema(
                [
                    ("outcome", pa.string()),
                    ("count", pa.int64()),
                    ("n", pa.int64()),
                    ("share", pa.float64()),
                    ("low", pa.float64()),
                    ("high", pa.float64()),
                ]
            ),
        ),
    )


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def comparison_markdown(result: Comparison) -> str:
    """The transitions (overall, then per scenario) and the win shares as markdown."""
    by = " / ".join(c.capitalize() for c in _group_columns(result.key) or ("scenario",))
    table = [
        {by: r["scenario"], "Transition": r["transition"], "Count": str(r["count"]), "Share (%)": _pct(r["share"])}
        for r in result.transitions.to_pylist()
    ]
    wins = [
        {
            "Outcome": r["outcome"],
            "Count": f"{r['count']}/{r['n']}",
            "Share (%)": _pct(r["share"]),
            "95% Wilson (%)": "–" if r["low"] is None else f"[{_pct(r['low'])}, {_pct(r['high'])}]",
        }
        for r in result.wins.to_pylist()
    ]
    return (
        f"# {result.a} (A) vs {result.b} (B) on {result.release}\n\n"
        f"{counted(result.compared, 'item')} compared (matched on {', '.join(result.key)}); left out: "
        f"{result.left_out} without a grade in both runs, {result.only_in_a} only in A, {result.only_in_b} only in B.\n\n"
        f"## Transitions from A to B\n\n"
        f"{markdown_table(table, right=['Count', 'Share (%)'])}\n\n"
        f"## Win shares\n\n{markdown_table(wins, right=['Count', 'Share (%)'])}\n"
    )
