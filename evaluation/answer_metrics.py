"""RefLVQA answer metrics from an evaluation's answers and grades (the paper's Table 5).

Per answer: groundedness is the mean of its sentences' grades (1 / 0.5 / 0; a sentence
citing nothing is 0), completeness the mean over the dataset answer's fact-checkable,
supported sentences (1 / 0.5 / 0 each), relevance the 1-7 rating.

Per model:

- ``Mean``: the mean of the per-answer scores (the paper's main text defines the score of
  an answer as the mean over its sentences; the benchmark's is the mean over answers).
- ``@1.0`` / ``@0.5``: the share of sentence-level grades at or above 1.0 / 0.5, pooled over
  all answers (the issue's example: grades 1, 0.5, 0 give @1.0 = 1/3 and @0.5 = 2/3).
- relevance: the mean rating (1-7), as in the paper.
- documents retrieved and used per modality: the mean number of each modality among the
  top-K documents shown, and among the distinct documents the answer cites.

An answer whose call failed or whose citations stayed unreadable after the retry is
excluded from every score and counted (``failed``). An answer with a grading error in one
metric is left out of that metric only (``<metric>_errors``); an answer with no supported
fact-checkable sentence has no completeness score (``no_statements``).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from statistics import fmean
from typing import Any

import pyarrow as pa

from mmcurate.core.markdown import markdown_table

from .graders import METRICS, SENTENCE_METRICS

ANSWERED = "answered"
SHORT = {"groundedness": "Grd", "completeness": "Com", "relevance": "Rel"}

METRICS_SCHEMA = pa.schema(
    [pa.field("model", pa.string()), pa.field("answers", pa.int64()), pa.field("answered", pa.int64()),
     pa.field("failed", pa.int64())]
    + [pa.field(f"{m}_{part}", pa.float64()) for m in SENTENCE_METRICS for part in ("mean", "at_1", "at_05")]
    + [pa.field("relevance_mean", pa.float64())]
    + [pa.field(f"{m}_errors", pa.int64()) for m in METRICS]
    + [pa.field("no_statements", pa.int64())]
    + [pa.field(f"{kind}_{modality}", pa.float64()) for kind in ("retrieved", "used") for modality in ("text", "image")]
)


def _mean(values: Sequence[float]) -> float | None:
    return fmean(values) if values else None


def answer_scores(grades: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(model, sample_id) -> {metric: score or None on error, "<metric>_grades": [...]}."""
    units: dict[tuple[str, str], dict[str, list[float | None]]] = defaultdict(lambda: defaultdict(list))
    for g in grades:
        units[(g["model"], g["sample_id"])][g["metric"]].append(g["grade"])
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for key, per_metric in units.items():
        scores: dict[str, Any] = {}
        for metric, values in per_metric.items():
            ok = None not in values
            scores[metric] = fmean(values) if ok and values else None  # type: ignore[arg-type]
            scores[f"{metric}_error"] = not ok
            scores[f"{metric}_grades"] = values if ok else []
        out[key] = scores
    return out


def _used(answer: dict[str, Any]) -> dict[str, str]:
    """The distinct documents an answer cites, with their modality."""
    kinds = {d["doc_id"]: d["modality"] for d in answer["retrieved"]}
    return {doc: kinds[doc] for s in answer["sentences"] for doc in s["citations"]}


def compute_answer_metrics(answers: pa.Table, grades: pa.Table) -> pa.Table:
    """One row per model (``METRICS_SCHEMA``)."""
    scores = answer_scores(grades.to_pylist())
    by_model: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in answers.to_pylist():
        by_model[row["model"]].append(row)
    rows = []
    for model, items in by_model.items():
        answered = [r for r in items if r["status"] == ANSWERED]
        out: dict[str, Any] = {"model": model, "answers": len(items), "answered": len(answered),
                               "failed": len(items) - len(answered)}
        for metric in METRICS:
            per_answer = [scores.get((model, r["sample_id"]), {}) for r in answered]
            values = [s[metric] for s in per_answer if s.get(metric) is not None]
            out[f"{metric}_errors"] = sum(1 for s in per_answer if s.get(f"{metric}_error"))
            out[f"{metric}_mean"] = _mean(values)
            if metric in SENTENCE_METRICS:
                pooled = [g for s in per_answer for g in s.get(f"{metric}_grades", [])]
                out[f"{metric}_at_1"] = sum(g >= 1.0 for g in pooled) / len(pooled) if pooled else None
                out[f"{metric}_at_05"] = sum(g >= 0.5 for g in pooled) / len(pooled) if pooled else None
        out["no_statements"] = sum(1 for r in answered if "completeness" not in scores.get((model, r["sample_id"]), {}))
        used = [_used(r) for r in answered]
        for modality in ("text", "image"):
            out[f"retrieved_{modality}"] = _mean([sum(d["modality"] == modality for d in r["retrieved"]) for r in items])
            out[f"used_{modality}"] = _mean([sum(kind == modality for kind in cited.values()) for cited in used])
        rows.append(out)
    return pa.Table.from_pylist(rows, schema=METRICS_SCHEMA)


def _num(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def answer_metrics_markdown(metrics: pa.Table, setting: str) -> str:
    """The paper's Table 5 shape: one row per model and RAG setting."""
    columns = ["Model", *(f"{SHORT[m]} {part}" for m in SENTENCE_METRICS for part in ("Mean", "@1.0", "@0.5")),
               "Rel (1-7)", "Retrieved text", "Retrieved image", "Used text", "Used image", "Answered", "Excluded"]
    rows = []
    for r in metrics.to_pylist():
        row = {"Model": f"{r['model']} + {setting}", "Rel (1-7)": _num(r["relevance_mean"]),
               "Answered": str(r["answered"]), "Excluded": str(r["failed"])}
        for m in SENTENCE_METRICS:
            row[f"{SHORT[m]} Mean"] = _num(r[f"{m}_mean"])
            row[f"{SHORT[m]} @1.0"] = _num(r[f"{m}_at_1"])
            row[f"{SHORT[m]} @0.5"] = _num(r[f"{m}_at_05"])
        for kind in ("retrieved", "used"):
            for modality in ("text", "image"):
                row[f"{kind.capitalize()} {modality}"] = _num(r[f"{kind}_{modality}"], 2)
        rows.append(row)
    return markdown_table(rows, columns, right=columns[1:]) + "\n"
