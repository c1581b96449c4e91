"""Metrics of the four-scenario evaluation (``scenarios.evaluate`` results).

Per group (scenario, optionally source / model / number of negatives):

- accuracy      = CORRECT / graded
- deflection    = NOT_ATTEMPTED / graded (the model said "I don't know")
- hallucination = INCORRECT / graded
- truthfulness  = accuracy - hallucination (CRAG-MM scoring: +1 correct, 0 abstain, -1 wrong)

``graded`` counts only answers with one of the three grades. Failed calls (``FAILED``) and
answers the judge could not grade (``JUDGE_ERROR``) are reported in their own columns and
excluded from every denominator: they say nothing about the model's behaviour, and
counting them as wrong (or as abstentions) would mix infrastructure trouble into the
scores. A group with no graded answer has null rates.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mmcurate.core.markdown import markdown_table
from mmcurate.core.plural import counted
from mmcurate.gating.prompts import STRICTNESS_LEVELS

from ..figures import new_axes, save_png
from .scenarios import FAILED, GOLD_MODALITIES, NEGATIVE_MODALITIES, SCENARIOS

RATES = ("accuracy", "deflection", "hallucination", "truthfulness")
LABELS = {
    "accuracy": "Accuracy",
    "deflection": "Deflection",
    "hallucination": "Hallucination",
    "truthfulness": "Truthfulness",
}
_COUNTS = {
    "CORRECT": "correct",
    "INCORRECT": "incorrect",
    "NOT_ATTEMPTED": "not_attempted",
    "JUDGE_ERROR": "judge_errors",
    FAILED: "failed",
}


# protocol order of the columns that have one; other columns sort by value
_ORDERS: dict[str, Sequence[str]] = {
    "scenario": SCENARIOS,
    "abstention": STRICTNESS_LEVELS,
    "negatives": ("ranked", *NEGATIVE_MODALITIES),
    "gold_modality": GOLD_MODALITIES,
}


def _order(key: tuple, by: Sequence[str]) -> tuple:
    """Scenarios, abstention levels and modalities in protocol order, everything else as is."""
    out = []
    for name, v in zip(by, key):
        known = _ORDERS.get(name, ())
        out.append((known.index(v) if v in known else len(known), v))
    return tuple(out)


def compute_metrics(results: pa.Table, by: Sequence[str] = ("scenario",)) -> pa.Table:
    """One row per group of ``by``: counts (n, graded, correct, incorrect, not_attempted,
    judge_errors, failed) and the four rates (fractions in [0, 1], truthfulness in [-1, 1])."""
    by = list(by)
    missing = [c for c in [*by, "grade"] if c not in results.column_names]
    if missing:
        raise ValueError(f"results lack {counted(len(missing), 'column')}: {', '.join(missing)}")
    groups: dict[tuple, dict[str, int]] = {}
    columns = [results.column(c).to_pylist() for c in by]
    for index, grade in enumerate(results.column("grade").to_pylist()):
        key = tuple(col[index] for col in columns)
        counts = groups.setdefault(key, dict.fromkeys(["n", *_COUNTS.values()], 0))
        counts["n"] += 1
        if grade not in _COUNTS:
            raise ValueError(f"unknown grade {grade!r} in results")
        counts[_COUNTS[grade]] += 1
    rows: list[dict[str, Any]] = []
    for key in sorted(groups, key=lambda k: _order(k, by)):
        c = groups[key]
        graded = c["correct"] + c["incorrect"] + c["not_attempted"]
        rates: dict[str, float | None] = dict.fromkeys(RATES)
        if graded:
            accuracy, hallucination = c["correct"] / graded, c["incorrect"] / graded
            rates["accuracy"] = accuracy
            rates["deflection"] = c["not_attempted"] / graded
            rates["hallucination"] = hallucination
            rates["truthfulness"] = accuracy - hallucination
        rows.append(
            {**dict(zip(by, key)), "n": c["n"], "graded": graded, **{k: c[k] for k in _COUNTS.values()}, **rates}
        )
    schema = pa.schema(
        [results.schema.field(c) for c in by]
        + [pa.field(name, pa.int64()) for name in ("n", "graded", *_COUNTS.values())]
        + [pa.field(r, pa.float64()) for r in RATES]
    )
    return pa.Table.from_pylist(rows, schema=schema)


def percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def metrics_markdown(metrics: pa.Table, keys: Sequence[str] | None = None) -> str:
    """A table like the paper's Table 4: one row per group, the rates in percent, then the
    graded count and the excluded (judge errors + failed) count."""
    if keys is None:
        keys = [c for c in metrics.column_names if c not in ("n", "graded", *_COUNTS.values(), *RATES)]
    heads = {k: k.replace("_", " ").capitalize() for k in keys}
    rates = {r: f"{LABELS[r]} (%)" for r in RATES}
    rows = [
        {
            **{heads[k]: str(row[k]) for k in keys},
            **{rates[r]: percent(row[r]) for r in RATES},
            "Graded": str(row["graded"]),
            "Excluded": str(row["judge_errors"] + row["failed"]),
        }
        for row in metrics.to_pylist()
    ]
    columns = [*heads.values(), *rates.values(), "Graded", "Excluded"]
    return markdown_table(rows, columns, right=[*rates.values(), "Graded", "Excluded"]) + "\n"


def plot_vs_negatives(
    results: pa.Table, path: Path | str, scenario: str = "realistic", title: str | None = None
) -> Path:
    """Rates against the number of negatives for ``scenario`` (one line per rate and model),
    written as a PNG with matplotlib's Agg canvas (no pyplot, no display needed)."""
    selected = results.filter(pc.equal(results.column("scenario"), scenario))
    if selected.num_rows == 0:
        raise ValueError(f"no results for scenario {scenario!r}")
    metrics = compute_metrics(selected, by=("model", "n_negatives")).to_pylist()
    models = list(dict.fromkeys(r["model"] for r in metrics))
    fig, ax = new_axes(6.4, 4.0)
    styles = ["-", "--", ":", "-."]
    for m_index, model in enumerate(models):
        rows = sorted((r for r in metrics if r["model"] == model), key=lambda r: r["n_negatives"])
        xs = [r["n_negatives"] for r in rows]
        for rate in RATES:
            ys = [float("nan") if r[rate] is None else 100 * r[rate] for r in rows]
            label = LABELS[rate] if len(models) == 1 else f"{LABELS[rate]} ({model})"
            ax.plot(xs, ys, styles[m_index % len(styles)], marker="o", label=label)
    ax.set_xlabel("number of negative contexts")
    ax.set_ylabel("%")
    ax.axhline(0, color="grey", linewidth=0.5)
    ax.set_title(title or f"{scenario}: metrics vs number of negatives")
    ax.legend(fontsize="small")
    return save_png(fig, path)
