"""RefLVQA answer metrics from an evaluation's answers and grades (the paper's Table 5).

Grades: groundedness 1 / 0.5 / 0 per sentence of the answer (a sentence citing nothing is
0), completeness 1 / 0.5 / 0 per fact-checkable, supported sentence of the dataset answer,
relevance a 1-7 rating per answer.

Per model, setting and N (one row of Table 5), by ``average`` (``evaluation.reflvqa.score_average``):

- ``per_answer`` (the default, 004 section 4.2: "the final groundedness score for each A is
  calculated as the averaged g(a_i, D) over all sentences in A"; completeness the same over
  the dataset answer's fact-checkable sentences): each answer's Mean is the mean of its
  sentence grades, its @1.0 / @0.5 the share of its sentence grades at or above 1.0 / 0.5;
  the row holds the mean of each over the answers. Per answer Mean = @1.0 + 0.5 x (@0.5 -
  @1.0) when grades are 1, 0.5 or 0, so the mean over answers keeps the identity every cell
  of Table 5 shows (InternVL2.5 + ImageRAG: 0.213 + 0.5 x 0.318 = 0.372).
- ``pooled``: the sentence grades of all answers pooled (a long answer weighs more); Mean,
  @1.0 and @0.5 over the pool, which keeps the identity too.
- relevance: the mean rating (1-7), as in the paper.
- documents retrieved and used per modality: the mean number of each modality among the
  documents shown (N x K, each once), over the questions whose queries could be read, and
  among the distinct documents the answer cites, over the answered questions.

An answer citing a number of no shown document is scored (its sentence citing only such
numbers is 0, as one citing nothing) and counted (``invalid_citations``: answers with at least
one). An answer with a failed call, or whose queries or citations stayed unreadable after the
retry, is excluded from every score and counted (``failed``; ``excluded_at_queries`` of them
were never asked for: their question's search queries could not be read). An answer with a grading error in one
metric is left out of that metric only (``<metric>_errors``); an answer with no supported
fact-checkable sentence has no completeness score (``no_statements``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from statistics import fmean
from typing import Any

import pyarrow as pa

from mmcurate.core.markdown import markdown_table

from .graders import METRICS, SENTENCE_METRICS
from .settings import row_name

ANSWERED = "answered"
PER_ANSWER, POOLED = "per_answer", "pooled"
AVERAGES = (PER_ANSWER, POOLED)
SHORT = {"groundedness": "Grd", "completeness": "Com", "relevance": "Rel"}

METRICS_SCHEMA = pa.schema(
    [
        pa.field("model", pa.string()),
        pa.field("setting", pa.string()),
        pa.field("n_queries", pa.int64()),
        pa.field("answers", pa.int64()),
        pa.field("answered", pa.int64()),
        pa.field("failed", pa.int64()),
        pa.field("excluded_at_queries", pa.int64()),
    ]
    + [pa.field(f"{m}_{part}", pa.float64()) for m in SENTENCE_METRICS for part in ("mean", "at_1", "at_05")]
    + [pa.field("relevance_mean", pa.float64())]
    + [pa.field(f"{m}_errors", pa.int64()) for m in METRICS]
    + [pa.field("no_statements", pa.int64()), pa.field("invalid_citations", pa.int64())]
    + [pa.field(f"{kind}_{modality}", pa.float64()) for kind in ("retrieved", "used") for modality in ("text", "image")]
)


def _mean(values: Sequence[float]) -> float | None:
    return fmean(values) if values else None


Run = tuple[str, str, int]  # (model, setting, N): one row of Table 5


def run_of(row: Mapping[str, Any]) -> Run:
    return row["model"], row["setting"], row["n_queries"]


def answer_grades(grades: list[dict[str, Any]]) -> dict[tuple[Run, str], dict[str, Any]]:
    """(run, sample_id) -> {"<metric>": [grades], "<metric>_error": bool}: a metric with a
    failed grade keeps no grades for that answer."""
    units: dict[tuple[Run, str], dict[str, list[float | None]]] = defaultdict(lambda: defaultdict(list))
    for g in grades:
        units[(run_of(g), g["sample_id"])][g["metric"]].append(g["grade"])
    out: dict[tuple[Run, str], dict[str, Any]] = {}
    for key, per_metric in units.items():
        scores: dict[str, Any] = {}
        for metric, values in per_metric.items():
            ok = None not in values
            scores[metric] = values if ok else []
            scores[f"{metric}_error"] = not ok
        out[key] = scores
    return out


def _used(answer: Mapping[str, Any]) -> dict[str, str]:
    """The distinct documents an answer cites, with their modality."""
    kinds = {d["doc_id"]: d["modality"] for d in answer["retrieved"]}
    return {doc: kinds[doc] for s in answer["sentences"] for doc in s["citations"]}


def _summary(per_answer: Sequence[Sequence[float]], average: str) -> tuple[float | None, float | None, float | None]:
    """(Mean, @1.0, @0.5) of sentence grades, each answer's list in ``per_answer`` (see the
    module docstring for ``average``)."""
    parts = [list(p) for p in per_answer if p]
    if average == "pooled":
        parts = [[g for p in parts for g in p]] if parts else []
    if not parts:
        return None, None, None
    return (
        fmean(fmean(p) for p in parts),
        fmean(sum(g >= 1.0 for g in p) / len(p) for p in parts),
        fmean(sum(g >= 0.5 for g in p) / len(p) for p in parts),
    )


def compute_answer_metrics(answers: pa.Table, grades: pa.Table, average: str = PER_ANSWER) -> pa.Table:
    """One row per model, setting and N (``METRICS_SCHEMA``), in the answers' order; sentence
    metrics averaged by ``average`` (``per_answer`` or ``pooled``, see the module docstring)."""
    if average not in AVERAGES:
        raise ValueError(f"unknown score average {average!r}; known: {', '.join(AVERAGES)}")
    scores = answer_grades(grades.to_pylist())
    by_run: dict[Run, list[dict[str, Any]]] = defaultdict(list)
    for row in answers.to_pylist():
        by_run[run_of(row)].append(row)
    rows = []
    for run, items in by_run.items():
        answered = [r for r in items if r["status"] == ANSWERED]
        out: dict[str, Any] = {
            "model": run[0],
            "setting": run[1],
            "n_queries": run[2],
            "answers": len(items),
            "answered": len(answered),
            "failed": len(items) - len(answered),
            "excluded_at_queries": sum(not r["queries"] for r in items),
        }
        per_answer = [scores.get((run, r["sample_id"]), {}) for r in answered]
        for metric in METRICS:
            out[f"{metric}_errors"] = sum(1 for s in per_answer if s.get(f"{metric}_error"))
            if metric in SENTENCE_METRICS:
                mean, at_1, at_05 = _summary([s.get(metric, []) for s in per_answer], average)
                out[f"{metric}_mean"], out[f"{metric}_at_1"], out[f"{metric}_at_05"] = mean, at_1, at_05
            else:
                out[f"{metric}_mean"] = _mean([g for s in per_answer for g in s.get(metric, [])])
        out["no_statements"] = sum(1 for s in per_answer if "completeness" not in s)
        out["invalid_citations"] = sum(any(s.get("invalid_citations") for s in r["sentences"]) for r in answered)
        searched = [r for r in items if r["queries"]]
        used = [_used(r) for r in answered]
        for modality in ("text", "image"):
            out[f"retrieved_{modality}"] = _mean(
                [sum(d["modality"] == modality for d in r["retrieved"]) for r in searched]
            )
            out[f"used_{modality}"] = _mean([sum(kind == modality for kind in cited.values()) for cited in used])
        rows.append(out)
    return pa.Table.from_pylist(rows, schema=METRICS_SCHEMA)


def _num(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def answer_metrics_markdown(metrics: pa.Table) -> str:
    """The paper's Table 5 shape: one row per model, RAG setting and N."""
    columns = [
        "Model",
        *(f"{SHORT[m]} {part}" for m in SENTENCE_METRICS for part in ("Mean", "@1.0", "@0.5")),
        "Rel (1-7)",
        "Retrieved text",
        "Retrieved image",
        "Used text",
        "Used image",
        "Answered",
        "Invalid citations",
        "Excluded (queries)",
        "Excluded (answer)",
    ]
    rows = []
    for r in metrics.to_pylist():
        row = {
            "Model": f"{r['model']} + {row_name(r['setting'], r['n_queries'])}",
            "Rel (1-7)": _num(r["relevance_mean"]),
            "Answered": str(r["answered"]),
            "Invalid citations": str(r["invalid_citations"]),
            "Excluded (queries)": str(r["excluded_at_queries"]),
            "Excluded (answer)": str(r["failed"] - r["excluded_at_queries"]),
        }
        for m in SENTENCE_METRICS:
            row[f"{SHORT[m]} Mean"] = _num(r[f"{m}_mean"])
            row[f"{SHORT[m]} @1.0"] = _num(r[f"{m}_at_1"])
            row[f"{SHORT[m]} @0.5"] = _num(r[f"{m}_at_05"])
        for kind in ("retrieved", "used"):
            for modality in ("text", "image"):
                row[f"{kind.capitalize()} {modality}"] = _num(r[f"{kind}_{modality}"], 2)
        rows.append(row)
    return markdown_table(rows, columns, right=columns[1:]) + "\n"
