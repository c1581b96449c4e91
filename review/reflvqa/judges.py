"""RefLVQA's evaluators checked against people (the paper's evaluator correlations).

An answer's graded units are every cited sentence (groundedness), every graded dataset
sentence (completeness) and the answer as a whole (relevance); ``n`` counts answers per
model and RAG setting ("smollm2 + TextRAG", as the paper's Table 6 compares its evaluator per
model and setting), each exported with all its units. People fill ``rating``: 1, 0.5 or 0 (relevance: 1
to 7). A sentence citing nothing is 0 by rule, not a judgement, so it is not exported and
counts 0 on both sides. Import gives, per metric, Pearson's r between the human and the
evaluator answer scores (the mean of the answer's units; with several annotators the mean of
their scores, as the paper does), the mean scores per model (the paper's Table 6), and
Cohen's kappa between each annotator's unit ratings and the evaluator's, averaged over
annotators, with relevance binned 1-3 / 4-5 / 6-7.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

import polars as pl

from mmcurate.benchmarks import register_part
from mmcurate.core.errors import MmcurateError
from mmcurate.core.markdown import markdown_table
from mmcurate.evaluation.reflvqa.graders import BY_RULE
from mmcurate.evaluation.reflvqa.settings import row_name

from ..agreement import agreement_summary, cohen_kappa, pearson
from ..judges import SEP, Decisions, JudgeReview, add_item, answers_of, number, release_rows

SENTENCE_RATINGS = (0.0, 0.5, 1.0)
RELEVANCE_BINS = ((1, 3, "not relevant"), (4, 5, "partially relevant"), (6, 7, "relevant"))
METRICS = ("groundedness", "completeness", "relevance")


def relevance_bin(rating: float) -> str:
    """1-3 not relevant, 4-5 partially relevant, 6-7 relevant (the paper's binning for kappa)."""
    return next(name for low, high, name in RELEVANCE_BINS if low <= rating <= high)


def _category(metric: str, value: float) -> str:
    return relevance_bin(value) if metric == "relevance" else f"{value:g}"


def _render(doc: Mapping[str, Any]) -> str:
    if doc["modality"] == "image":
        return f"[{doc['doc_id']}] image"
    return f"[{doc['doc_id']}] " + (f"{doc['title']}: " if doc.get("title") else "") + (doc.get("text") or "")


def _answer_key(row: Mapping[str, Any]) -> tuple[str, str, int, str]:
    """(model, setting, N, sample_id): one answer of an evaluation grid."""
    return row["model"], row["setting"], row["n_queries"], row["sample_id"]


class RefLVQAJudgeReview(JudgeReview):
    benchmark = "reflvqa"
    columns = (
        "item_id",
        "model",
        "metric",
        "question",
        "answer",
        "statement",
        "documents",
        "scale",
        "rating",
        "annotator",
    )
    field = "rating"
    unit = "answers"
    samples = "qa"

    def items(self, release: Path, folders: Sequence[Path]) -> dict[str, dict[str, Any]]:
        qa = release_rows(release, "qa", ["sample_id", "question"])
        kb_paths = sorted((release / "data").glob("knowledge_base-*.parquet"))
        docs = {
            d["doc_id"]: d
            for d in pl.read_parquet(
                [str(p) for p in kb_paths], columns=["doc_id", "modality", "text", "title"]
            ).to_dicts()
        }
        items: dict[str, dict[str, Any]] = {}
        for folder in folders:
            answers_table = answers_of(folder)
            path = folder / "grades.parquet"
            if not path.is_file():
                raise MmcurateError(f"{folder}: no grades.parquet (is this a RefLVQA evaluation folder?)")
            grades_table = pl.read_parquet(path)
            if not {"setting", "n_queries"} <= set(answers_table.columns) & set(grades_table.columns):
                raise MmcurateError(
                    f"{folder}: written before the RefLVQA grid (no setting / n_queries columns); "
                    "run mmcurate evaluate again to review it"
                )
            answers = {_answer_key(r): r for r in answers_table.to_dicts() if r["status"] == "answered"}
            grades = grades_table.to_dicts()
            failed = {_answer_key(g) for g in grades if g["grade"] is None}
            for g in grades:
                key = _answer_key(g)
                answer = answers.get(key)
                if answer is None or key in failed:
                    continue  # only fully graded answers: their scores compare
                model, setting, n, sid = key
                add_item(
                    items,
                    {
                        "item_id": SEP.join([model, setting, str(n), sid, g["metric"], str(g["unit"])]),
                        "model": f"{model} + {row_name(setting, n)}",
                        "metric": g["metric"],
                        "group": sid,
                        "sample_id": sid,
                        "question": qa[g["sample_id"]]["question"],
                        "answer": " ".join(s["text"] for s in answer["sentences"]),
                        "statement": g["statement"],
                        "documents": "\n\n".join(_render(docs[d]) for d in g["documents"]),
                        "scale": "1-7" if g["metric"] == "relevance" else "1 / 0.5 / 0",
                        "decision": g["grade"],
                        "by_rule": g["evaluator"] in BY_RULE,
                    },
                    folder,
                )
        return items

    def choose(self, groups: Mapping[str, list[str]], n: int, rng: random.Random) -> tuple[list[str], int]:
        answers = rng.sample(sorted(groups), min(n, len(groups)))  # n answers, each with all its units
        return sorted(k for a in answers for k in groups[a]), len(answers)

    def choices(self, item: Mapping[str, Any]) -> tuple[str, ...]:
        scale = range(1, 8) if item["metric"] == "relevance" else sorted(SENTENCE_RATINGS, reverse=True)
        return tuple(f"{v:g}" for v in scale)

    def human_value(self, item: Mapping[str, Any], raw: Any, where: str) -> float:
        text = "" if raw is None else str(raw).strip()
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        metric = item["metric"]
        allowed = tuple(float(v) for v in range(1, 8)) if metric == "relevance" else SENTENCE_RATINGS
        if value not in allowed:
            scale = "an integer 1-7" if metric == "relevance" else "1, 0.5 or 0"
            raise MmcurateError(f"{where}: rating is {text!r}; expected {scale} for {metric}")
        return value

    def agreement(self, decisions: Decisions, labels: Mapping[str, Mapping[str, float]]) -> tuple[dict, dict]:
        """Per metric: Pearson's r over answers, mean scores per model, human-evaluator kappa."""
        items = decisions.items
        out: dict[str, Any] = {}
        for metric in METRICS:
            units = {i for i, item in items.items() if item["metric"] == metric and not item.get("by_rule")}
            answers: dict[tuple[str, str], list[str]] = defaultdict(list)
            for i in units:
                answers[(items[i]["model"], items[i]["group"])].append(i)
            rule = defaultdict(list)  # sentences citing no shown document: 0 on both sides
            for item in items.values():
                if item["metric"] == metric and item.get("by_rule"):
                    rule[(item["model"], item["group"])].append(0.0)
            human_scores, judge_scores, models = [], [], []
            for key, mine in sorted(answers.items()):
                per_annotator = [[ls[i] for i in mine] for ls in labels.values() if all(i in ls for i in mine)]
                if not per_annotator:
                    continue  # nobody rated the whole answer
                human_scores.append(fmean(fmean(scores + rule[key]) for scores in per_annotator))
                judge_scores.append(fmean([items[i]["decision"] for i in mine] + rule[key]))
                models.append(key[0])
            kappas = []
            for ls in labels.values():
                rated = sorted(i for i in units if i in ls)
                if rated:
                    k = cohen_kappa(
                        [_category(metric, ls[i]) for i in rated],
                        [_category(metric, items[i]["decision"]) for i in rated],
                    )
                    if not math.isnan(k):
                        kappas.append(k)
            means = [
                {
                    "model": m,
                    "answers": models.count(m),
                    "human": fmean(h for h, mm in zip(human_scores, models) if mm == m),
                    "evaluator": fmean(j for j, mm in zip(judge_scores, models) if mm == m),
                }
                for m in sorted(set(models))
            ]
            r = pearson(human_scores, judge_scores) if len(human_scores) >= 2 else math.nan
            out[metric] = {
                "answers": len(human_scores),
                "pearson": None if math.isnan(r) else r,
                "kappa": fmean(kappas) if kappas else None,
                "per_model": means,
            }
        between = agreement_summary(
            {a: {i: _category(items[i]["metric"], v) for i, v in ls.items()} for a, ls in labels.items()}
        )
        return out, between

    def markdown(self, report: Mapping[str, Any]) -> str:
        rows = []
        for metric, r in report.items():
            for m in r["per_model"]:
                rows.append(
                    {
                        "Metric": metric,
                        "Model": m["model"],
                        "Answers": str(m["answers"]),
                        "Human": number(m["human"]),
                        "Evaluator": number(m["evaluator"]),
                        "Pearson (metric)": number(r["pearson"]),
                        "Kappa (metric)": number(r["kappa"]),
                    }
                )
        columns = ["Metric", "Model", "Answers", "Human", "Evaluator", "Pearson (metric)", "Kappa (metric)"]
        return markdown_table(rows, columns, right=columns[2:]) + "\n"


REVIEW = RefLVQAJudgeReview()
register_part("reflvqa", "judge_review")(REVIEW)
