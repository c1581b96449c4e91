"""DeflectionBench's analysis tables beyond Table 4, computed from one evaluation's results.

- ``strictness_metrics``: the strictness sweep (the paper's Tables 6 and 9): accuracy,
  deflection and hallucination per abstention level and scenario. Realistic and
  adversarial rows are taken at one number of negatives (``sweep_negatives``: 2, Table 4's
  n, when the run has it, else the smallest n it has), so every level is compared on the
  same evidence.
- ``modality_metrics``: the negative-modality analysis (Table 5): the realistic scenario
  per abstention level, gold modality (text, image) and negative setting (text, image, multimodal).

Both are long tables (``metrics.compute_metrics`` rows); ``wide_markdown`` lays one out
as the paper does, one row per level (or per gold/negative pair), the rates of each
scenario side by side.
"""
from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from mmcurate.core.markdown import markdown_table

from .metrics import LABELS, percent, compute_metrics
from .scenarios import DEFAULT_NEGATIVES, NEGATIVE_MODALITIES, RANKED

TABLE_RATES = ("accuracy", "deflection", "hallucination")
SHORT = {"accuracy": "Acc", "deflection": "Defl", "hallucination": "Hall"}


def ranked(results: pa.Table) -> pa.Table:
    """The rows of the four-scenario protocol (negatives in pairing order)."""
    return results.filter(pc.equal(results["negatives"], RANKED))


def sweep_negatives(results: pa.Table) -> int | None:
    """The n at which the sweep compares realistic and adversarial answers (None: neither ran)."""
    counts = {n for n, scenario in zip(results["n_negatives"].to_pylist(), results["scenario"].to_pylist())
              if scenario in ("realistic", "adversarial")}
    if not counts:
        return None
    return DEFAULT_NEGATIVES if DEFAULT_NEGATIVES in counts else min(counts)


def strictness_metrics(results: pa.Table) -> pa.Table:
    """Rates per (abstention, scenario) over the protocol rows, at one n (see the module docstring)."""
    rows = ranked(results)
    n = sweep_negatives(rows)
    keep = pc.is_in(rows["n_negatives"], pa.array([0] if n is None else [0, n], pa.int32()))
    return compute_metrics(rows.filter(keep), by=("abstention", "scenario"))


def modality_metrics(results: pa.Table) -> pa.Table:
    """Realistic-scenario rates per (abstention, gold_modality, negatives) of the modality analysis."""
    rows = results.filter(pc.is_in(results["negatives"], pa.array(list(NEGATIVE_MODALITIES))))
    return compute_metrics(rows, by=("abstention", "gold_modality", "negatives"))


def _column(group: str | None, rate: str) -> str:
    return f"{group.capitalize()} {SHORT[rate]} (%)" if group else f"{LABELS[rate]} (%)"


def wide_markdown(metrics: pa.Table, rows_by: Sequence[str], columns_by: str | None,
                  rates: Sequence[str] = TABLE_RATES) -> str:
    """One markdown row per value of ``rows_by``; for each value of ``columns_by`` (or once,
    when None) the ``rates`` in percent; then the graded and excluded counts summed over the row."""
    records = metrics.to_pylist()
    heads = [name.replace("_", " ").capitalize() for name in rows_by]
    groups = list(dict.fromkeys(r[columns_by] for r in records)) if columns_by else [None]
    columns = [*heads, *(_column(group, rate) for group in groups for rate in rates), "Graded", "Excluded"]
    table: dict[tuple, dict[str, str]] = {}
    for r in records:
        key = tuple(r[name] for name in rows_by)
        row = table.setdefault(key, {**dict.fromkeys(columns, "–"), **{h: str(v) for h, v in zip(heads, key)},
                                     "Graded": 0, "Excluded": 0})
        row["Graded"] += r["graded"]
        row["Excluded"] += r["judge_errors"] + r["failed"]
        for rate in rates:
            row[_column(r[columns_by] if columns_by else None, rate)] = percent(r[rate])
    return markdown_table(list(table.values()), columns, right=columns[len(heads):]) + "\n"
