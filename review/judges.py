"""Automatic judges checked against people: export judge decisions for review, import the
labels, report agreement as the papers do.

An evaluation folder is what ``mmcurate evaluate ... --out DIR`` writes. Export samples, per
model, ``n`` graded decisions (seeded) into ``batch.jsonl`` / ``batch.csv``, without the
judge's decision (people label blind); import reads those decisions back from the same
evaluation folders.

DeflectionBench (the judge's SimpleQA grade of an answer): the ``n`` items of a model are
balanced across the scenarios it was evaluated in (n // s each, the first n % s scenarios
one more; a scenario short of items leaves its share to the others). People fill ``label``
with CORRECT, INCORRECT or NOT_ATTEMPTED. Import gives, per model, raw agreement and Cohen's
kappa between the human label and the judge's grade, and their average over the models
(the paper's Table 7).

RefLVQA (the evaluators' grades of an answer): ``n`` answers per model, each with all its
graded units: every cited sentence (groundedness), every graded dataset sentence
(completeness), the answer as a whole (relevance). People fill ``rating``: 1, 0.5 or 0
(relevance: 1 to 7). A sentence citing nothing is 0 by rule, not a judgement, so it is not
exported and counts 0 on both sides. Import gives, per metric, Pearson's r between the
human and the evaluator answer scores (the mean of the answer's units; with several
annotators the mean of their scores, as the paper does), the mean scores per model (the
paper's Table 6), and Cohen's kappa between each annotator's unit ratings and the
evaluator's, averaged over annotators, with relevance binned 1-3 / 4-5 / 6-7.

Several annotators (one file each) also get their agreement with each other (Cohen or
Fleiss kappa, ``agreement.agreement_summary``). For DeflectionBench an item's human label is
their strict majority (ties left out and counted).
"""
from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any

import polars as pl

from mmcurate.core.errors import MmcurateError
from mmcurate.core.markdown import markdown_table

from mmcurate.review.agreement import agreement_summary, cohen_kappa, pearson
from mmcurate.releases.reader import refuse_inside_release
from mmcurate.review.batches import prepare_batch_folder, read_records, write_batch

LABEL_COLUMNS = ("label", "rating", "annotator")  # what people fill in

GRADES = ("CORRECT", "INCORRECT", "NOT_ATTEMPTED")
SPELLINGS = {"correct": "CORRECT", "incorrect": "INCORRECT", "not_attempted": "NOT_ATTEMPTED",
             "not attempted": "NOT_ATTEMPTED"}
SENTENCE_RATINGS = (0.0, 0.5, 1.0)
RELEVANCE_BINS = ((1, 3, "not relevant"), (4, 5, "partially relevant"), (6, 7, "relevant"))
NO_CITATION = "rule:no-citation"
DEFLECTION_COLUMNS = ("item_id", "model", "scenario", "question", "gold_answers", "answer", "label", "annotator")
REFLVQA_COLUMNS = ("item_id", "model", "metric", "question", "answer", "statement", "documents", "scale", "rating",
                   "annotator")
SEP = "|"


# ---------------------------------------------------------------------------- evaluation runs
@dataclass(frozen=True)
class Decisions:
    """The judge decisions of one or more evaluation folders, by item id."""

    benchmark: str  # deflectionbench | reflvqa
    items: dict[str, dict[str, Any]]  # item_id -> what the batch shows, plus "decision" (hidden)


def _answers(folder: Path) -> pl.DataFrame:
    path = folder / "answers.parquet"
    if not path.is_file():
        raise MmcurateError(f"{folder}: no answers.parquet (give an evaluation output folder)")
    return pl.read_parquet(path)


def _release_rows(release: Path, config: str, columns: list[str]) -> dict[str, dict[str, Any]]:
    paths = sorted((release / "data").glob(f"{config}-*.parquet"))
    if not paths:
        raise MmcurateError(f"{release}: no data/{config}-*.parquet")
    return {r["sample_id"]: r for r in pl.read_parquet([str(p) for p in paths], columns=columns).to_dicts()}


def _deflection_items(release: Path, folders: Sequence[Path]) -> dict[str, dict[str, Any]]:
    samples = _release_rows(release, "test", ["sample_id", "question", "answers"])
    items: dict[str, dict[str, Any]] = {}
    for folder in folders:
        for r in _answers(folder).to_dicts():
            if r["grade"] not in GRADES:
                continue  # failed calls and judge errors are not decisions
            key = SEP.join([r["model"], r["sample_id"], r["scenario"], str(r["n_negatives"]),
                            r.get("negatives") or "ranked", r["abstention"]])
            if key in items:
                raise MmcurateError(f"{folder}: decision {key} is also in another evaluation folder")
            sample = samples.get(r["sample_id"])
            if sample is None:
                raise MmcurateError(f"{folder}: sample {r['sample_id']} is not in the release {release}")
            items[key] = {"item_id": key, "model": r["model"], "scenario": r["scenario"], "group": r["scenario"],
                          "question": sample["question"], "gold_answers": " | ".join(sample["answers"]),
                          "answer": r["answer"], "decision": r["grade"]}
    return items


def _render(doc: Mapping[str, Any]) -> str:
    if doc["modality"] == "image":
        return f"[{doc['doc_id']}] image"
    return f"[{doc['doc_id']}] " + (f"{doc['title']}: " if doc.get("title") else "") + (doc.get("text") or "")


def _reflvqa_items(release: Path, folders: Sequence[Path]) -> dict[str, dict[str, Any]]:
    qa = _release_rows(release, "qa", ["sample_id", "question"])
    kb_paths = sorted((release / "data").glob("knowledge_base-*.parquet"))
    docs = {d["doc_id"]: d for d in pl.read_parquet([str(p) for p in kb_paths],
                                                  columns=["doc_id", "modality", "text", "title"]).to_dicts()}
    items: dict[str, dict[str, Any]] = {}
    for folder in folders:
        answers = {(r["model"], r["sample_id"]): r for r in _answers(folder).to_dicts() if r["status"] == "answered"}
        path = folder / "grades.parquet"
        if not path.is_file():
            raise MmcurateError(f"{folder}: no grades.parquet (is this a RefLVQA evaluation folder?)")
        grades = pl.read_parquet(path).to_dicts()
        failed = {(g["model"], g["sample_id"]) for g in grades if g["grade"] is None}
        for g in grades:
            answer = answers.get((g["model"], g["sample_id"]))
            if answer is None or (g["model"], g["sample_id"]) in failed:
                continue  # only fully graded answers: their scores compare
            key = SEP.join([g["model"], g["sample_id"], g["metric"], str(g["unit"])])
            if key in items:
                raise MmcurateError(f"{folder}: grade {key} is also in another evaluation folder")
            items[key] = {
                "item_id": key, "model": g["model"], "metric": g["metric"], "group": g["sample_id"],
                "question": qa[g["sample_id"]]["question"], "answer": " ".join(s["text"] for s in answer["sentences"]),
                "statement": g["statement"], "documents": "\n\n".join(_render(docs[d]) for d in g["documents"]),
                "scale": "1-7" if g["metric"] == "relevance" else "1 / 0.5 / 0", "decision": g["grade"],
                "by_rule": g["evaluator"] == NO_CITATION,
            }
    return items


def read_decisions(release: Path | str, folders: Sequence[Path | str]) -> Decisions:
    """Every judge decision of the evaluation ``folders`` of ``release``."""
    release = Path(release)
    if not folders:
        raise MmcurateError("give at least one evaluation folder (--evaluation)")
    manifest = release / "manifest.json"
    if not manifest.is_file():
        raise MmcurateError(f"{release} is not a release: no manifest.json")
    benchmark = json.loads(manifest.read_text())["benchmark"]
    paths = [Path(f) for f in folders]
    items = _reflvqa_items(release, paths) if benchmark == "reflvqa" else _deflection_items(release, paths)
    if not items:
        raise MmcurateError("the evaluation folders hold no graded decision")
    return Decisions(benchmark, items)


# ---------------------------------------------------------------------------- export
def balanced(groups: Mapping[str, list[str]], n: int, rng: random.Random) -> list[str]:
    """``n`` ids spread evenly over the groups (see the module docstring), seeded by ``rng``."""
    names = sorted(groups)
    pools = {g: sorted(groups[g]) for g in names}
    chosen: list[str] = []
    for i, g in enumerate(names):
        quota = n // len(names) + (1 if i < n % len(names) else 0)
        take = rng.sample(pools[g], min(quota, len(pools[g])))
        chosen += take
        taken = set(take)
        pools[g] = [x for x in pools[g] if x not in taken]
    rest = sorted(x for g in names for x in pools[g])
    chosen += rng.sample(rest, min(n - len(chosen), len(rest)))
    return sorted(chosen)


@dataclass(frozen=True)
class JudgeExport:
    benchmark: str
    items: int
    per_model: dict[str, int]
    jsonl: Path
    csv: Path


def export_judge_batch(release: Path | str, folders: Sequence[Path | str], out: Path | str, n: int = 100,
                       seed: int = 0, force: bool = False) -> JudgeExport:
    """``n`` decisions per model (RefLVQA: ``n`` answers per model) into ``out/batch.{jsonl,csv}``
    (refused over a batch people already labelled, unless ``force``)."""
    if n < 1:
        raise MmcurateError(f"--n must be at least 1, got {n}")
    prepare_batch_folder(Path(release), Path(out), LABEL_COLUMNS, force)
    decisions = read_decisions(release, folders)
    rng = random.Random(seed)
    by_model: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for key, item in decisions.items.items():
        if not item.get("by_rule"):
            by_model[item["model"]][item["group"]].append(key)
    rows, per_model = [], {}
    for model in sorted(by_model):
        groups = by_model[model]
        if decisions.benchmark == "reflvqa":  # n answers, each with all its units
            answers = rng.sample(sorted(groups), min(n, len(groups)))
            keys = sorted(k for a in answers for k in groups[a])
            per_model[model] = len(answers)
        else:
            keys = balanced(groups, n, rng)
            per_model[model] = len(keys)
        rows += [decisions.items[k] for k in keys]
    columns = REFLVQA_COLUMNS if decisions.benchmark == "reflvqa" else DEFLECTION_COLUMNS
    blank = dict.fromkeys(LABEL_COLUMNS, "")
    jsonl, csv_path = write_batch([{**r, **blank} for r in rows], columns, Path(out))
    return JudgeExport(decisions.benchmark, len(rows), per_model, jsonl, csv_path)


# ---------------------------------------------------------------------------- import
def _human_value(benchmark: str, metric: str | None, raw: Any, where: str) -> Any:
    text = "" if raw is None else str(raw).strip()
    if benchmark == "deflectionbench":
        label = SPELLINGS.get(text.lower())
        if label is None:
            raise MmcurateError(f"{where}: label is {text!r}; expected CORRECT, INCORRECT or NOT_ATTEMPTED")
        return label
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    allowed = tuple(float(v) for v in range(1, 8)) if metric == "relevance" else SENTENCE_RATINGS
    if value not in allowed:
        scale = "an integer 1-7" if metric == "relevance" else "1, 0.5 or 0"
        raise MmcurateError(f"{where}: rating is {text!r}; expected {scale} for {metric}")
    return value


def read_judge_labels(path: Path | str, decisions: Decisions) -> tuple[str, dict[str, Any]]:
    """(annotator, {item_id: label or rating}) of one labelled file; raise on any bad row."""
    path = Path(path)
    field = "rating" if decisions.benchmark == "reflvqa" else "label"
    labels: dict[str, Any] = {}
    names: set[str] = set()
    for line, record in read_records(path, ("item_id", field)):
        where = f"{path}:{line}"
        item = str(record.get("item_id") or "").strip()
        if item not in decisions.items:
            raise MmcurateError(f"{where}: item_id {item!r} is not a decision of the given evaluations")
        if str(record.get(field) or "").strip() == "":
            continue  # not labelled by this annotator
        if item in labels:
            raise MmcurateError(f"{where}: item_id {item!r} labelled twice")
        labels[item] = _human_value(decisions.benchmark, decisions.items[item].get("metric"), record.get(field), where)
        annotator = str(record.get("annotator") or "").strip()
        if annotator:
            names.add(annotator)
    if len(names) > 1:
        raise MmcurateError(f"{path}: one file per annotator, found annotators {sorted(names)}")
    return (names.pop() if names else path.stem), labels


def relevance_bin(rating: float) -> str:
    """1-3 not relevant, 4-5 partially relevant, 6-7 relevant (the paper's binning for kappa)."""
    return next(name for low, high, name in RELEVANCE_BINS if low <= rating <= high)


def _category(metric: str, value: float) -> str:
    return relevance_bin(value) if metric == "relevance" else f"{value:g}"


def _nan_to_none(value: float) -> float | None:
    return None if math.isnan(value) else value


def deflection_agreement(decisions: Decisions, labels: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
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
        rows.append({"model": model, "items": len(mine),
                     "agreement": sum(h == j for h, j in zip(human, judge)) / len(mine),
                     "kappa": _nan_to_none(cohen_kappa(human, judge))})
    kappas = [r["kappa"] for r in rows if r["kappa"] is not None]
    average = {"model": "Average", "items": sum(r["items"] for r in rows),
               "agreement": fmean(r["agreement"] for r in rows) if rows else None,
               "kappa": fmean(kappas) if kappas else None}
    return {"per_model": rows, "average": average, "ties": ties}


def reflvqa_agreement(decisions: Decisions, labels: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    """Per metric: Pearson's r over answers, mean scores per model, human-evaluator kappa."""
    items = decisions.items
    out: dict[str, Any] = {}
    for metric in ("groundedness", "completeness", "relevance"):
        units = {i for i, item in items.items() if item["metric"] == metric and not item.get("by_rule")}
        answers: dict[tuple[str, str], list[str]] = defaultdict(list)
        for i in units:
            answers[(items[i]["model"], items[i]["group"])].append(i)
        rule = defaultdict(list)  # sentences citing nothing: 0 on both sides
        for i, item in items.items():
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
                k = cohen_kappa([_category(metric, ls[i]) for i in rated],
                                [_category(metric, items[i]["decision"]) for i in rated])
                if not math.isnan(k):
                    kappas.append(k)
        means = [{"model": m, "answers": models.count(m),
                  "human": fmean(h for h, mm in zip(human_scores, models) if mm == m),
                  "evaluator": fmean(j for j, mm in zip(judge_scores, models) if mm == m)}
                 for m in sorted(set(models))]
        out[metric] = {
            "answers": len(human_scores),
            "pearson": _nan_to_none(pearson(human_scores, judge_scores)) if len(human_scores) >= 2 else None,
            "kappa": fmean(kappas) if kappas else None,
            "per_model": means,
        }
    return out


@dataclass(frozen=True)
class JudgeImport:
    benchmark: str
    annotators: list[str]
    items: int
    report: dict[str, Any]
    markdown: str
    path: Path


def _num(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def judge_markdown(benchmark: str, report: Mapping[str, Any]) -> str:
    if benchmark == "deflectionbench":
        rows = [{"Model": r["model"], "Items": str(r["items"]), "Agreement (%)": _num(
            None if r["agreement"] is None else 100 * r["agreement"], 1), "Cohen's kappa": _num(r["kappa"], 2)}
            for r in [*report["per_model"], report["average"]]]
        return markdown_table(rows, ["Model", "Items", "Agreement (%)", "Cohen's kappa"],
                              right=["Items", "Agreement (%)", "Cohen's kappa"]) + "\n"
    rows = []
    for metric, r in report.items():
        for m in r["per_model"]:
            rows.append({"Metric": metric, "Model": m["model"], "Answers": str(m["answers"]),
                         "Human": _num(m["human"]), "Evaluator": _num(m["evaluator"]),
                         "Pearson (metric)": _num(r["pearson"]), "Kappa (metric)": _num(r["kappa"])})
    columns = ["Metric", "Model", "Answers", "Human", "Evaluator", "Pearson (metric)", "Kappa (metric)"]
    return markdown_table(rows, columns, right=columns[2:]) + "\n"


def import_judge_labels(release: Path | str, folders: Sequence[Path | str], files: Sequence[Path | str],
                        out: Path | str) -> JudgeImport:
    """Validate labelled files against the evaluations' decisions; write ``out/judge_agreement.{json,md}``."""
    if not files:
        raise MmcurateError("give at least one labelled file")
    release, out = Path(release), Path(out)
    refuse_inside_release(out, "--out", release)
    decisions = read_decisions(release, folders)
    labels: dict[str, dict[str, Any]] = {}
    for file in files:
        name, mine = read_judge_labels(file, decisions)
        if name in labels:
            raise MmcurateError(f"{file}: annotator {name!r} already given by another file")
        labels[name] = mine
    labelled = {i for ls in labels.values() for i in ls}
    if not labelled:
        raise MmcurateError("no labelled item in the given files")
    if decisions.benchmark == "deflectionbench":
        report: dict[str, Any] = deflection_agreement(decisions, labels)
        between = agreement_summary(labels)
    else:
        report = reflvqa_agreement(decisions, labels)
        between = agreement_summary({a: {i: _category(decisions.items[i]["metric"], v) for i, v in ls.items()}
                                     for a, ls in labels.items()})
    text = judge_markdown(decisions.benchmark, report)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "judge_agreement.json"
    path.write_text(json.dumps({"release": str(release), "benchmark": decisions.benchmark,
                                "evaluations": [str(f) for f in folders], "annotators": sorted(labels),
                                "items": len(labelled), "agreement": report, "between_annotators": between},
                               indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (out / "judge_agreement.md").write_text(text, encoding="utf-8")
    return JudgeImport(decisions.benchmark, sorted(labels), len(labelled), report, text, path)
