"""What an evaluation run writes: answers, metrics per scenario and per source, the
Table-4 markdown and the metrics-vs-negatives plot."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from mmcurate.core.tables import write_table

from .metrics import compute_metrics, metrics_markdown, plot_vs_negatives


def write_evaluation(results: pa.Table, out: Path, title: str) -> str:
    """Write the evaluation's files into ``out``; return the markdown tables."""
    out.mkdir(parents=True, exist_ok=True)
    write_table(results, out / "answers.parquet")
    by_scenario = compute_metrics(results, by=("scenario",))
    by_source = compute_metrics(results, by=("scenario", "source"))
    write_table(by_scenario, out / "metrics_by_scenario.parquet")
    write_table(by_source, out / "metrics_by_source.parquet")
    text = (f"# {title}\n\n## Per scenario\n\n{metrics_markdown(by_scenario)}\n\n"
            f"## Per scenario and source\n\n{metrics_markdown(by_source)}\n")
    (out / "table.md").write_text(text)
    if pc.any(pc.equal(results["scenario"], "realistic")).as_py():
        plot_vs_negatives(results, out / "metrics_vs_negatives.png")
    return text
