"""DeflectionBench's tables, computed from one evaluation's results.

- ``table4_rows``: the rows Table 4 reads (per scenario, per source, CRAG): parametric and
  oracle, and realistic and adversarial at one number of negatives, 2 by the caption of
  Table 4 (``evaluation.deflectionbench.table_negatives``). A run that asked several n
  (Figure 3's sweep) would otherwise count every sample once per n in those rows;
  ``missing_negatives`` names the scenarios that ran without Table 4's n, whose rows then say
  so (``empty_rows``) instead of reading another n.
- ``negatives_sweep``: Figure 3's data, one row per (scenario, n): realistic and adversarial
  at every n the run asked, the oracle (0 negatives) for reference.
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
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mmcurate.core.markdown import markdown_table
from mmcurate.gating.prompts import STRICTNESS_LEVELS

from .metrics import LABELS, compute_metrics, percent
from .scenarios import DEFAULT_NEGATIVES, NEGATIVE_MODALITIES, RANKED, SCENARIOS

NEGATIVE_SCENARIOS = ("realistic", "adversarial")  # the scenarios that show negatives

TABLE_RATES = ("accuracy", "deflection", "hallucination")
SHORT = {"accuracy": "Acc", "deflection": "Defl", "hallucination": "Hall"}


def ranked(results: pa.Table) -> pa.Table:
    """The rows of the four-scenario protocol (negatives in pairing order)."""
    return results.filter(pc.equal(results["negatives"], RANKED))


def _negative_counts(results: pa.Table) -> dict[str, set[int]]:
    """scenario -> the n it ran at, for the scenarios that show negatives."""
    counts: dict[str, set[int]] = {}
    for n, scenario in zip(results["n_negatives"].to_pylist(), results["scenario"].to_pylist()):
        if scenario in NEGATIVE_SCENARIOS:
            counts.setdefault(scenario, set()).add(n)
    return counts


def table4_rows(results: pa.Table, n: int = DEFAULT_NEGATIVES) -> pa.Table:
    """The protocol rows Table 4 reads: every scenario without negatives, the others at ``n``."""
    rows = ranked(results)
    shows_negatives = pc.is_in(rows["scenario"], pa.array(NEGATIVE_SCENARIOS))
    return rows.filter(pc.or_(pc.invert(shows_negatives), pc.equal(rows["n_negatives"], n)))


def missing_negatives(results: pa.Table, n: int = DEFAULT_NEGATIVES) -> dict[str, list[int]]:
    """The scenarios with negatives that ran, but not at ``n``: scenario -> the n they ran at."""
    return {
        scenario: sorted(counts) for scenario, counts in _negative_counts(ranked(results)).items() if n not in counts
    }


def empty_rows(metrics: pa.Table, scenarios: Sequence[str], levels: Sequence[str] | None) -> pa.Table:
    """``metrics`` with a row of no answers (rates null) for each of ``scenarios`` (per abstention
    level when ``levels`` is given), in protocol order: Table 4's rows for a scenario that has
    no answer at its n."""
    blank = {name: 0 for name in metrics.column_names if metrics.schema.field(name).type == pa.int64()}
    extra = [
        {**blank, "scenario": scenario, **({"abstention": level} if levels else {})}
        for level in (levels or (None,))
        for scenario in scenarios
    ]
    rows = metrics.to_pylist() + extra
    keys = [name for name in ("abstention", "scenario") if name in metrics.column_names]
    rows.sort(key=lambda r: tuple((STRICTNESS_LEVELS if k == "abstention" else SCENARIOS).index(r[k]) for k in keys))
    return pa.Table.from_pylist(rows, schema=metrics.schema)


def negatives_sweep(results: pa.Table, by_level: bool = False) -> pa.Table:
    """Figure 3's data: rates per (scenario, n) of the realistic and adversarial answers, and the
    oracle's (n = 0) for reference; per abstention level first when ``by_level``."""
    rows = ranked(results)
    rows = rows.filter(pc.is_in(rows["scenario"], pa.array(["oracle", *NEGATIVE_SCENARIOS])))
    return compute_metrics(rows, by=(*(("abstention",) if by_level else ()), "scenario", "n_negatives"))


def sweep_negatives(results: pa.Table, n: int = DEFAULT_NEGATIVES) -> int | None:
    """The n at which the strictness sweep compares realistic and adversarial answers: Table 4's
    ``n`` when the run has it, else the smallest it has (the heading names it); None: neither ran."""
    counts = set().union(*_negative_counts(results).values())
    if not counts:
        return None
    return n if n in counts else min(counts)


def strictness_metrics(results: pa.Table, n: int = DEFAULT_NEGATIVES) -> pa.Table:
    """Rates per (abstention, scenario) over the protocol rows, at one n (``sweep_negatives``)."""
    rows = ranked(results)
    at = sweep_negatives(rows, n)
    keep = pc.is_in(rows["n_negatives"], pa.array([0] if at is None else [0, at], pa.int32()))
    return compute_metrics(rows.filter(keep), by=("abstention", "scenario"))


def modality_metrics(results: pa.Table) -> pa.Table:
    """Realistic-scenario rates per (abstention, gold_modality, negatives) of the modality analysis."""
    rows = results.filter(pc.is_in(results["negatives"], pa.array(list(NEGATIVE_MODALITIES))))
    return compute_metrics(rows, by=("abstention", "gold_modality", "negatives"))


def _column(group: str | None, rate: str) -> str:
    return f"{group.capitalize()} {SHORT[rate]} (%)" if group else f"{LABELS[rate]} (%)"


def wide_markdown(
    metrics: pa.Table, rows_by: Sequence[str], columns_by: str | None, rates: Sequence[str] = TABLE_RATES
) -> str:
    """One markdown row per value of ``rows_by``; for each value of ``columns_by`` (or once,
    when None) the ``rates`` in percent; then the graded and excluded counts summed over the row."""
    records = metrics.to_pylist()
    heads = [name.replace("_", " ").capitalize() for name in rows_by]
    groups = list(dict.fromkeys(r[columns_by] for r in records)) if columns_by else [None]
    columns = [*heads, *(_column(group, rate) for group in groups for rate in rates), "Graded", "Excluded"]
    table: dict[tuple[Any, ...], dict[str, Any]] = {}  # markdown cells, and the two counts summed
    for r in records:
        key = tuple(r[name] for name in rows_by)
        row = table.setdefault(
            key, {**dict.fromkeys(columns, "–"), **{h: str(v) for h, v in zip(heads, key)}, "Graded": 0, "Excluded": 0}
        )
        row["Graded"] += r["graded"]
        row["Excluded"] += r["judge_errors"] + r["failed"]
        for rate in rates:
            row[_column(r[columns_by] if columns_by else None, rate)] = percent(r[rate])
    return markdown_table(list(table.values()), columns, right=columns[len(heads) :]) + "\n"
