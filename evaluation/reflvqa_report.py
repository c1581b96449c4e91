"""What a RefLVQA evaluation run writes: answers, grades, per-question retrieval scores,
the answer metrics (Table 5 shape), the knowledge base's retrieval quality (NDCG@10,
Recall@100, Hit@1..10) and the Hit@K plot."""
from __future__ import annotations

from pathlib import Path
from statistics import fmean
from typing import Any

import pyarrow as pa

from mmcurate.core.markdown import markdown_table
from mmcurate.core.tables import write_table

from .answer_metrics import answer_metrics_markdown, compute_answer_metrics
from .reflvqa import RefLVQARun
from .retrieval_metrics import HIT_KS, hit_at_k, plot_hit_at_k

RETRIEVAL_SUMMARY = pa.schema(
    [pa.field("questions", pa.int64()), pa.field("scored", pa.int64()), pa.field("ndcg_at_10", pa.float64()),
     pa.field("recall_at_100", pa.float64())] + [pa.field(f"hit_at_{k}", pa.float64()) for k in HIT_KS]
)


def retrieval_summary(retrieval: pa.Table) -> dict[str, Any]:
    """Means over the questions with at least one relevant document (``scored``)."""
    rows = [r for r in retrieval.to_pylist() if r["relevant"] > 0]
    out: dict[str, Any] = {"questions": retrieval.num_rows, "scored": len(rows),
                           "ndcg_at_10": fmean(r["ndcg_at_10"] for r in rows) if rows else None,
                           "recall_at_100": fmean(r["recall_at_100"] for r in rows) if rows else None}
    hits = hit_at_k([r["first_hit"] for r in rows]) if rows else {}
    out.update({f"hit_at_{k}": hits.get(k) for k in HIT_KS})
    return out


def retrieval_markdown(summary: dict[str, Any]) -> str:
    columns = ["NDCG@10", "Recall@100", *(f"Hit@{k}" for k in HIT_KS), "Questions scored"]

    def num(value: float | None) -> str:
        return "–" if value is None else f"{value:.4f}"

    row = {"NDCG@10": num(summary["ndcg_at_10"]), "Recall@100": num(summary["recall_at_100"]),
           **{f"Hit@{k}": num(summary[f"hit_at_{k}"]) for k in HIT_KS},
           "Questions scored": f"{summary['scored']} of {summary['questions']}"}
    return markdown_table([row], columns, right=columns) + "\n"


def write_reflvqa_evaluation(run: RefLVQARun, out: Path, title: str, setting: str, notes: list[str]) -> str:
    """Write the run's files into ``out``; return the markdown."""
    out.mkdir(parents=True, exist_ok=True)
    write_table(run.answers, out / "answers.parquet")
    write_table(run.grades, out / "grades.parquet")
    write_table(run.retrieval, out / "retrieval.parquet")
    metrics = compute_answer_metrics(run.answers, run.grades)
    write_table(metrics, out / "metrics.parquet")
    summary = retrieval_summary(run.retrieval)
    write_table(pa.Table.from_pylist([summary], schema=RETRIEVAL_SUMMARY), out / "retrieval_metrics.parquet")
    counts = [{"count": name.replace("_", " "), "value": value} for name, value in run.counts.items()]
    sections = [
        f"# {title}",
        f"## Answer metrics\n\n{answer_metrics_markdown(metrics, setting)}",
        f"## Retrieval quality of the knowledge base (release citations as relevance labels)\n\n"
        f"{retrieval_markdown(summary)}",
        f"## Counts\n\n{markdown_table(counts, ['count', 'value'], right=['value'])}",
    ]
    if notes:
        sections.append("## Notes\n\n" + "\n".join(f"- {note}" for note in notes))
    text = "\n\n".join(sections) + "\n"
    (out / "table.md").write_text(text)
    if summary["scored"]:
        plot_hit_at_k({k: summary[f"hit_at_{k}"] for k in HIT_KS}, out / "hit_at_k.png",
                      title=f"Hit@K after reranking ({summary['scored']} questions)")
    return text
