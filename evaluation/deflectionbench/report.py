"""What a DeflectionBench evaluation run writes: answers, Table 4 (metrics per scenario and
per source, realistic and adversarial at Table 4's number of negatives, ``table_n``: 2 by its
caption), the sweep over the number of negatives (Figure 3's data) beside the
metrics-vs-negatives plot; with several abstention levels the strictness-sweep table (Tables
6/9), with the modality analysis Table 5; with CRAG-scored answers
(``evaluation.crag.crag_score``) the CRAG rates of Table 4's rows beside them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from mmcurate.core.plural import counted
from mmcurate.core.tables import write_table
from mmcurate.gating.prompts import DEFAULT_ABSTENTION

from ..crag import CRAG_COLUMNS, crag_markdown, crag_metrics
from .metrics import compute_metrics, metrics_markdown, plot_vs_negatives
from .scenarios import DEFAULT_NEGATIVES
from .tables import (
    empty_rows,
    missing_negatives,
    modality_metrics,
    negatives_sweep,
    ranked,
    strictness_metrics,
    sweep_negatives,
    table4_rows,
    wide_markdown,
)

ITEM_KEY = ("sample_id", "scenario", "n_negatives", "negatives", "abstention", "system")
CELL = ("scenario", "n_negatives", "negatives", "abstention")  # what a run chooses (``evaluation.runs``)
ANSWERS_FILE, CRAG_FILE = "answers.parquet", "crag.parquet"


def write_evaluation(
    results: pa.Table,
    out: Path,
    title: str,
    crag: pa.Table | None = None,
    crag_note: str = "",
    notes: Sequence[str] = (),
    table_n: int = DEFAULT_NEGATIVES,
) -> str:
    """Write the evaluation's files into ``out``; return the markdown tables. ``crag``: the
    results with the CRAG columns (``crag.parquet``, ``crag_metrics.parquet`` and a section
    with the same rows as the per-scenario table, ``crag_note`` under its heading);
    ``notes``: lines under the title (e.g. which prompt templates were used); ``table_n``: the
    number of negatives of Table 4's realistic and adversarial rows."""
    out.mkdir(parents=True, exist_ok=True)
    write_table(results, out / ANSWERS_FILE)
    protocol = ranked(results)
    levels = list(dict.fromkeys(protocol["abstention"].to_pylist()))
    keys = ("abstention", "scenario") if len(levels) > 1 else ("scenario",)
    table4 = table4_rows(protocol, table_n)
    missing = missing_negatives(protocol, table_n)
    by_level = levels if len(levels) > 1 else None
    by_scenario = empty_rows(compute_metrics(table4, by=keys), list(missing), by_level)
    by_source = compute_metrics(table4, by=(*keys, "source"))
    sweep = negatives_sweep(protocol, by_level=len(levels) > 1)
    write_table(by_scenario, out / "metrics_by_scenario.parquet")
    write_table(by_source, out / "metrics_by_source.parquet")
    write_table(sweep, out / "metrics_by_negatives.parquet")
    at = f"realistic and adversarial at {counted(table_n, 'negative')}"
    asked: dict[tuple[int, ...], list[str]] = {}  # the n a scenario ran at -> the scenarios
    for scenario, ran in missing.items():
        asked.setdefault(tuple(ran), []).append(scenario)
    gap = "".join(
        f"\n\n{' and '.join(names).capitalize()}: no answers at {counted(table_n, 'negative')} in this "
        f"run (it asked n = {', '.join(map(str, ran))}), so Table 4's {' and '.join(names)} rows are empty; "
        "the table per number of negatives has them."
        for ran, names in asked.items()
    )
    sections = [
        f"# {title}",
        *notes,
        f"## Per scenario (Table 4: {at}){gap}\n\n{metrics_markdown(by_scenario)}",
        f"## Per scenario and source ({at})\n\n{metrics_markdown(by_source)}",
        "## Per number of negatives (Figure 3: realistic and adversarial per n, the oracle at 0)\n\n"
        + metrics_markdown(sweep),
    ]
    if len(levels) > 1:
        strictness = strictness_metrics(results, table_n)
        write_table(strictness, out / "metrics_strictness.parquet")
        n = sweep_negatives(protocol, table_n)
        at_n = f" (realistic and adversarial at {counted(n, 'negative')})" if n else ""
        sections.append(f"## Strictness sweep{at_n}\n\n{wide_markdown(strictness, ['abstention'], 'scenario')}")
    if pc.any(pc.not_equal(results["negatives"], "ranked")).as_py():
        modality = modality_metrics(results)
        write_table(modality, out / "metrics_negative_modality.parquet")
        sections.append(
            "## Negative-modality analysis (realistic scenario)\n\n"
            + wide_markdown(modality, ["abstention", "gold_modality", "negatives"], None)
        )
    if crag is not None:
        write_table(crag.select([*ITEM_KEY, *(f.name for f in CRAG_COLUMNS)]), out / CRAG_FILE)
        scored = empty_rows(crag_metrics(table4_rows(crag, table_n), by=keys), list(missing), by_level)
        write_table(scored, out / "crag_metrics.parquet")
        sections.append(f"## CRAG scoring (per scenario, {at})\n\n{crag_note}\n\n{crag_markdown(scored, keys)}")
    text = "\n\n".join(sections) + "\n"
    (out / "table.md").write_text(text)
    realistic = protocol.filter(pc.equal(protocol["scenario"], "realistic"))
    if realistic.num_rows:
        level = DEFAULT_ABSTENTION if DEFAULT_ABSTENTION in levels else levels[0]
        plot_vs_negatives(
            realistic.filter(pc.equal(realistic["abstention"], level)),
            out / "metrics_vs_negatives.png",
            title=f"realistic: metrics vs number of negatives ({level} abstention)",
        )
    return text
