"""What a RefLVQA evaluation run writes: answers, grades, per-question retrieval scores,
the answer metrics (Table 5 shape, one row per model, setting and N), the knowledge base's
retrieval quality per set of modalities searched (Table 4's NDCG@10 and Recall@100, Figure
3's Hit@1..10) and the Hit@K plot."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

import pyarrow as pa

from mmcurate.core.markdown import markdown_table
from mmcurate.core.tables import write_table

from ..retrieval_metrics import HIT_KS, hit_at_k, plot_hit_at_k
from .answer_metrics import answer_metrics_markdown, compute_answer_metrics
from .grid import RefLVQARun

ANSWERS_FILE, GRADES_FILE, RETRIEVAL_FILE = "answers.parquet", "grades.parquet", "retrieval.parquet"
SEARCHED = {"text": "text documents", "image": "image documents", "text+image": "text + image (one ranked list)"}
RETRIEVAL_SUMMARY = pa.schema(
    [
        pa.field("searched", pa.string()),
        pa.field("settings", pa.list_(pa.string())),
        pa.field("questions", pa.int64()),
        pa.field("scored", pa.int64()),
        pa.field("ndcg_at_10", pa.float64()),
        pa.field("recall_at_100", pa.float64()),
    ]
    + [pa.field(f"hit_at_{k}", pa.float64()) for k in HIT_KS]
)


def retrieval_summary(retrieval: pa.Table, settings: Mapping[str, Sequence[str]]) -> list[dict[str, Any]]:
    """Per set of modalities searched (``settings``: searched -> the settings that read it),
    means over the questions with at least one relevant document (``scored``)."""
    out = []
    for searched, names in settings.items():
        mine = [r for r in retrieval.to_pylist() if r["searched"] == searched]
        rows = [r for r in mine if r["relevant"] > 0]
        summary: dict[str, Any] = {
            "searched": searched,
            "settings": list(names),
            "questions": len(mine),
            "scored": len(rows),
            "ndcg_at_10": fmean(r["ndcg_at_10"] for r in rows) if rows else None,
            "recall_at_100": fmean(r["recall_at_100"] for r in rows) if rows else None,
        }
        hits = hit_at_k([r["first_hit"] for r in rows]) if rows else {}
        summary.update({f"hit_at_{k}": hits.get(k) for k in HIT_KS})
        out.append(summary)
    return out


def retrieval_markdown(summaries: Sequence[Mapping[str, Any]]) -> str:
    columns = [
        "Documents searched",
        "Settings",
        "NDCG@10",
        "Recall@100",
        *(f"Hit@{k}" for k in HIT_KS),
        "Questions scored",
    ]

    def num(value: float | None) -> str:
        return "–" if value is None else f"{value:.4f}"

    rows = [
        {
            "Documents searched": SEARCHED[s["searched"]],
            "Settings": ", ".join(s["settings"]),
            "NDCG@10": num(s["ndcg_at_10"]),
            "Recall@100": num(s["recall_at_100"]),
            **{f"Hit@{k}": num(s[f"hit_at_{k}"]) for k in HIT_KS},
            "Questions scored": f"{s['scored']} of {s['questions']}",
        }
        for s in summaries
    ]
    return markdown_table(rows, columns, right=columns[2:]) + "\n"


def write_reflvqa_evaluation(
    run: RefLVQARun, out: Path, title: str, settings: Mapping[str, Sequence[str]], notes: list[str]
) -> str:
    """Write the run's files into ``out``; return the markdown. ``settings``: each set of
    modalities searched -> the settings that read it (Table 5 names)."""
    out.mkdir(parents=True, exist_ok=True)
    write_table(run.answers, out / ANSWERS_FILE)
    write_table(run.grades, out / GRADES_FILE)
    write_table(run.retrieval, out / RETRIEVAL_FILE)
    metrics = compute_answer_metrics(run.answers, run.grades, run.score_average)
    write_table(metrics, out / "metrics.parquet")
    summaries = retrieval_summary(run.retrieval, settings)
    write_table(pa.Table.from_pylist(summaries, schema=RETRIEVAL_SUMMARY), out / "retrieval_metrics.parquet")
    counts = [{"count": name.replace("_", " "), "value": value} for name, value in run.counts.items()]
    sections = [
        f"# {title}",
        f"## Answer metrics (Table 5)\n\n{answer_metrics_markdown(metrics)}",
        "## Retrieval quality of the knowledge base (Table 4, Figure 3; the question as the query, the release's "
        f"citations as relevance labels)\n\n{retrieval_markdown(summaries)}",
        f"## Counts\n\n{markdown_table(counts, ['count', 'value'], right=['value'])}",
    ]
    if notes:
        sections.append("## Notes\n\n" + "\n".join(f"- {note}" for note in notes))
    text = "\n\n".join(sections) + "\n"
    (out / "table.md").write_text(text)
    scored = {SEARCHED[s["searched"]]: {k: s[f"hit_at_{k}"] for k in HIT_KS} for s in summaries if s["scored"]}
    if scored:
        plot_hit_at_k(scored, out / "hit_at_k.png", title="Hit@K after reranking, per set of documents searched")
    return text
