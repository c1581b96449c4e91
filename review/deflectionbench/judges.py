"""DeflectionBench's judge checked against people (the paper's Table 7).

A decision is the judge's SimpleQA grade of one answer. The ``n`` items of a model are
balanced across the scenarios it was evaluated in (``judges.balanced``). People fill
``label`` with CORRECT, INCORRECT or NOT_ATTEMPTED. Import gives, per model, raw agreement
and Cohen's kappa between the human label and the judge's grade, and their average over the
models. With several annotators an item's human label is their strict majority (ties left
out and counted).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

from mmcurate.benchmarks import register_part
from mmcurate.core.errors import MmcurateError
from mmcurate.core.markdown import markdown_table

from ..agreement import agreement_summary, cohen_kappa
from ..judges import SEP, Decisions, JudgeReview, add_item, answers_of, balanced, number, release_rows

GRADES = ("CORRECT", "INCORRECT", "NOT_ATTEMPTED")
SPELLINGS = {
    "correct": "CORRECT",
    "incorrect": "INCORRECT",
    "not_attempted": "NOT_ATTEMPTED",
    "not attempted": "NOT_ATTEMPTED",
}


def _nan_to_none(value: float) -> float | None:
    return None if math.isnan(value) else value


class DeflectionJudgeReview(JudgeReview):
    benchmark = "deflectionbench"
    columns = ("item_id", "model", "scenario", "question", "gold_answers", "answer", "label", "annotator")
    field = "label"
    unit = "decisions"
    samples = "test"

    def items(self, release: Path, folders: Sequence[Path]) -> dict[str, dict[str, Any]]:
        samples = release_rows(release, "test", ["sample_id", "question", "answers"])
        items: dict[str, dict[str, Any]] = {}
        for folder in folders:
            for r in answers_of(folder).to_dicts():
                if r["grade"] not in GRADES:
                    continue  # failed calls and judge errors are not decisions
                sample = samples.get(r["sample_id"])
                if sample is None:
                    raise MmcurateError(f"{folder}: sample {r['sample_id']} is not in the release {release}")
                key = SEP.join(
                    [
                        r["model"],
                        r["sample_id"],
                        r["scenario"],
                        str(r["n_negatives"]),
                        r.get("negatives") or "ranked",
                        r["abstention"],
                    ]
                )
                add_item(
                    items,
                    {
                        "item_id": key,
                        "model": r["model"],
                        "scenario": r["scenario"],
                        "group": r["scenario"],
                        "sample_id": r["sample_id"],
                        "question": sample["question"],
                        "gold_answers": " | ".join(sample["answers"]),
                        "answer": r["answer"],
                        "decision": r["grade"],
                    },
                    folder,
                )
        return items

    def choose(self, groups: Mapping[str, list[str]], n: int, rng: random.Random) -> tuple[list[str], int]:
        keys = balanced(groups, n, rng)
        return keys, len(keys)

    def choices(self, item: Mapping[str, Any]) -> tuple[str, ...]:
        return GRADES

    def human_value(self, item: Mapping[str, Any], raw: Any, where: str) -> str:
        text = "" if raw is None else str(raw).strip()
        label = SPELLINGS.get(text.lower())
        if label is None:
            raise MmcurateError(f"{where}: label is {text!r}; expected CORRECT, INCORRECT or NOT_ATTEMPTED")
        return label

    def agreement(self, decisions: Decisions, labels: Mapping[str, Mapping[str, str]]) -> tuple[dict, dict]:
        """Per model: raw agreement and Cohen's kappa of the human (majority) label and the judge."""
        per_item: dict[str, str] = {}
        ties = 0
        for item in sorted({i for ls in labels.values() for i in ls}):
            votes = [ls[item] for ls in labels.values() if item in ls]
            top = max(set(votes), key=votes.count)
            if votes.count(top) > len(votes) / 2:
                per_item[item] = top
            else:
                ties += 1
        rows = []
        for model in sorted({decisions.items[i]["model"] for i in per_item}):
            mine = [i for i in per_item if decisions.items[i]["model"] == model]
            human = [per_item[i] for i in mine]
            judge = [decisions.items[i]["decision"] for i in mine]
            rows.append(
                {
                    "model": model,
                    "items": len(mine),
                    "agreement": sum(h == j for h, j in zip(human, judge)) / len(mine),
                    "kappa": _nan_to_none(cohen_kappa(human, judge)),
                }
            )
        kappas = [r["kappa"] for r in rows if r["kappa"] is not None]
        average = {
            "model": "Average",
            "items": sum(r["items"] for r in rows),
            "agreement": fmean(r["agreement"] for r in rows) if rows else None,
            "kappa": fmean(kappas) if kappas else None,
        }
        return {"per_model": rows, "average": average, "ties": ties}, agreement_summary(labels)

    def markdown(self, report: Mapping[str, Any]) -> str:
        rows = [
            {
                "Model": r["model"],
                "Items": str(r["items"]),
                "Agreement (%)": number(None if r["agreement"] is None else 100 * r["agreement"], 1),
                "Cohen's kappa": number(r["kappa"], 2),
            }
            for r in [*report["per_model"], report["average"]]
        ]
        text = (
            markdown_table(
                rows,
                ["Model", "Items", "Agreement (%)", "Cohen's kappa"],
                right=["Items", "Agreement (%)", "Cohen's kappa"],
            )
            + "\n"
        )
        ties = report.get("ties", 0)
        if ties:  # the table counts the items with a majority label only: say what became of the others
            labelled = report["average"]["items"] + ties
            text += (
                f"\nItems counts the labelled items with a strict majority label; {ties} of {labelled} are left "
                "out: their annotators tie.\n"
            )
        return text


REVIEW = DeflectionJudgeReview()
register_part("deflectionbench", "judge_review")(REVIEW)
