"""What a DeflectionBench evaluation run writes: answers, metrics per scenario and per
source, the Table-4 markdown and the metrics-vs-negatives plot; with several abstention
levels the strictness-sweep table (Tables 6/9), with the modality analysis Table 5; with
CRAG-scored answers (``evaluation.crag.crag_score``) the CRAG rates beside them."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from mmcurate.core.tables import write_table
from mmcurate.gating.prompts import DEFAULT_ABSTENTION
from mmcurate.core.plural import counted

from .crag import CRAG_COLUMNS, crag_markdown, crag_metrics
from .deflection_tables import modality_metrics, ranked, strictness_metrics, sweep_negatives, wide_markdown
from .metrics import compute_metrics, metrics_markdown, plot_vs_negatives


ITEM_KEY = ("sample_id", "scenario", "n_negatives", "negatives", "abstention", "system")
CELL = ("scenario", "n_negatives", "negatives", "abstention")  # what a run chooses (``evaluation.runs``)
ANSWERS_FILE, CRAG_FILE = "answers.parquet", "crag.parquet"


def write_evaluation(results: pa.Table, out: Path, title: str, crag: pa.Table | None = None,
                     crag_note: str = "", notes: Sequence[str] = ()) -> str:
    """Write the evaluation's files into ``out``; return the markdown tables. ``crag``: the
    results with the CRAG columns (``crag.parquet``, ``crag_metrics.parquet`` and a section
    with the same grouping as the per-scenario table, ``crag_note`` under its heading);
    ``notes``: lines under the title (e.g. which prompt templates were used)."""
    out.mkdir(parents=True, exist_ok=True)
    write_table(results, out / ANSWERS_FILE)
    protocol = ranked(results)
    levels = list(dict.fromkeys(protocol["abstention"].to_pylist()))
    keys = ("abstention", "scenario") if len(levels) > 1 else ("scenario",)
    by_scenario = compute_metrics(protocol, by=keys)
    by_source = compute_metrics(protocol, by=(*keys, "source"))
    write_table(by_scenario, out / "metrics_by_scenario.parquet")
    write_table(by_source, out / "metrics_by_source.parquet")
    sections = [f"# {title}", *notes, f"## Per scenario\n\n{metrics_markdown(by_scenario)}",
                f"## Per scenario and source\n\n{metrics_markdown(by_source)}"]
    if len(levels) > 1:
        sweep = strictness_metrics(results)
        write_table(sweep, out / "metrics_strictness.parquet")
        n = sweep_negatives(protocol)
        at = f" (realistic and adversarial at {counted(n, 'negative')})" if n else ""
        sections.append(f"## Strictness sweep{at}\n\n{wide_markdown(sweep, ['abstention'], 'scenario')}")
    if pc.any(pc.not_equal(results["negatives"], "ranked")).as_py():
        modality = modality_metrics(results)
        write_table(modality, out / "metrics_negative_modality.parquet")
        sections.append("## Negative-modality analysis (realistic scenario)\n\n"
                        + wide_markdown(modality, ["abstention", "gold_modality", "negatives"], None))
    if crag is not None:
        write_table(crag.select([*ITEM_KEY, *(f.name for f in CRAG_COLUMNS)]), out / CRAG_FILE)
        scored = crag_metrics(ranked(crag), by=keys)
        write_table(scored, out / "crag_metrics.parquet")
        sections.append(f"## CRAG scoring (per scenario)\n\n{crag_note}\n\n{crag_markdown(scored, keys)}")
    text = "\n\n".join(sections) + "\n"
    (out / "table.md").write_text(text)
    realistic = protocol.filter(pc.equal(protocol["scenario"], "realistic"))
    if realistic.num_rows:
        level = DEFAULT_ABSTENTION if DEFAULT_ABSTENTION in levels else levels[0]
        plot_vs_negatives(realistic.filter(pc.equal(realistic["abstention"], level)), out / "metrics_vs_negatives.png",
                          title=f"realistic: metrics vs number of negatives ({level} abstention)")
    return text
