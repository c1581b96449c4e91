"""Automatic judges checked against people: export judge decisions for review, import the
labels, report agreement as the papers do.

An evaluation folder is what ``mmcurate evaluate ... --out DIR`` writes. Export samples, per
model, ``n`` graded decisions (seeded) into ``batch.jsonl`` / ``batch.csv``, without the
judge's decision (people label blind); import reads those decisions back from the same
evaluation folders.

What a decision is, how ``n`` is spread, what people fill in and which agreement the paper
reports differ per benchmark: each is a ``JudgeReview`` (``deflectionbench.judges`` for
DeflectionBench's Table 7, ``reflvqa.judges`` for RefLVQA's evaluator correlations), each
registered as its benchmark's ``judge_review`` (``review.builtin`` imports them). This module holds what they share: reading the evaluation
folders, the blind batch, reading labelled files, and the output.

Several annotators (one file each) also get their agreement with each other (Cohen or
Fleiss kappa, ``agreement.agreement_summary``).
"""

from __future__ import annotations

import json
import random
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import polars as pl

from mmcurate.core.errors import MmcurateError
from mmcurate.releases.manifest import load_manifest
from mmcurate.review.batches import labels_import, prepare_batch_folder, read_records, write_batch

LABEL_COLUMNS = ("label", "rating", "annotator")  # what people fill in

SEP = "|"
RESULTS = ("judge_agreement.json", "judge_agreement.md")  # what an import writes to its --out


@dataclass(frozen=True)
class Decisions:
    """The judge decisions of one or more evaluation folders, by item id."""

    items: dict[str, dict[str, Any]]  # item_id -> what the batch shows, plus "decision" (hidden)


@dataclass(frozen=True)
class JudgeExport:
    benchmark: str
    unit: str  # what --n counts per model: decisions, or answers
    items: int
    per_model: dict[str, int]
    jsonl: Path
    csv: Path
    rows: list[dict[str, Any]]  # the exported decisions (with their hidden ``decision``: not for people)


@dataclass(frozen=True)
class JudgeImport:
    benchmark: str
    annotators: list[str]
    items: int
    report: dict[str, Any]
    markdown: str
    path: Path


def answers_of(folder: Path) -> pl.DataFrame:
    path = folder / "answers.parquet"
    if not path.is_file():
        raise MmcurateError(f"{folder}: no answers.parquet (give an evaluation output folder)")
    return pl.read_parquet(path)


def release_rows(release: Path, config: str, columns: list[str]) -> dict[str, dict[str, Any]]:
    paths = sorted((release / "data").glob(f"{config}-*.parquet"))
    if not paths:
        raise MmcurateError(f"{release}: no data/{config}-*.parquet")
    return {r["sample_id"]: r for r in pl.read_parquet([str(p) for p in paths], columns=columns).to_dicts()}


def add_item(items: dict[str, dict[str, Any]], item: dict[str, Any], folder: Path) -> None:
    """Add one decision; the same decision in two evaluation folders is refused."""
    if item["item_id"] in items:
        raise MmcurateError(f"{folder}: decision {item['item_id']} is also in another evaluation folder")
    items[item["item_id"]] = item


def balanced(groups: Mapping[str, list[str]], n: int, rng: random.Random) -> list[str]:
    """``n`` ids spread evenly over the groups (n // g each, the first n % g groups one more;
    a group short of ids leaves its share to the others), seeded by ``rng``."""
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


class JudgeReview(ABC):
    """One benchmark's review of its evaluation judge (see the module docstring)."""

    benchmark: ClassVar[str]  # the releases it reviews
    columns: ClassVar[tuple[str, ...]]  # the batch's columns, in order
    field: ClassVar[str]  # what people fill in: "label" or "rating"
    unit: ClassVar[str]  # what ``n`` counts per model
    samples: ClassVar[str]  # the release config holding the items' samples (their images)

    @abstractmethod
    def items(self, release: Path, folders: Sequence[Path]) -> dict[str, dict[str, Any]]:
        """Every graded decision of ``folders`` as a batch row plus its hidden ``decision``,
        its ``model``, its ``sample_id`` and its sampling ``group``; ``by_rule`` marks rows no
        judge decided."""

    @abstractmethod
    def choose(self, groups: Mapping[str, list[str]], n: int, rng: random.Random) -> tuple[list[str], int]:
        """The item ids of one model to export (its ids by group), and how many units they are."""

    @abstractmethod
    def choices(self, item: Mapping[str, Any]) -> tuple[str, ...]:
        """What a person may fill in for ``item``, as written (what ``human_value`` reads)."""

    @abstractmethod
    def human_value(self, item: Mapping[str, Any], raw: Any, where: str) -> Any:
        """A person's label or rating of ``item``, checked; MmcurateError naming ``where``."""

    @abstractmethod
    def agreement(self, decisions: Decisions, labels: Mapping[str, Mapping[str, Any]]) -> tuple[dict, dict]:
        """The paper's agreement report, and the annotators' agreement with each other."""

    @abstractmethod
    def markdown(self, report: Mapping[str, Any]) -> str: ...

    # ------------------------------------------------------------------ shared steps
    def read_decisions(self, release: Path | str, folders: Sequence[Path | str]) -> Decisions:
        """Every judge decision of the evaluation ``folders`` of ``release``."""
        release = Path(release)
        if not folders:
            raise MmcurateError("give at least one evaluation folder (--evaluation)")
        benchmark = load_manifest(release).benchmark
        if benchmark != self.benchmark:
            raise MmcurateError(f"{release} is a {benchmark} release, not {self.benchmark}")
        items = self.items(release, [Path(f) for f in folders])
        if not items:
            raise MmcurateError("the evaluation folders hold no graded decision")
        return Decisions(items)

    def export(
        self,
        release: Path | str,
        folders: Sequence[Path | str],
        out: Path | str,
        n: int = 100,
        seed: int = 0,
        force: bool = False,
    ) -> JudgeExport:
        """``n`` units per model into ``out/batch.{jsonl,csv}``, blind (refused over a batch people
        already labelled, unless ``force``)."""
        if n < 1:
            raise MmcurateError(f"--n must be at least 1, got {n}")
        prepare_batch_folder(Path(release), Path(out), LABEL_COLUMNS, force)
        decisions = self.read_decisions(release, folders)
        rng = random.Random(seed)
        by_model: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        for key, item in decisions.items.items():
            if not item.get("by_rule"):
                by_model[item["model"]][item["group"]].append(key)
        rows, per_model = [], {}
        for model in sorted(by_model):
            keys, per_model[model] = self.choose(by_model[model], n, rng)
            rows += [decisions.items[k] for k in keys]
        blank = dict.fromkeys(LABEL_COLUMNS, "")
        jsonl, csv_path = write_batch([{**r, **blank} for r in rows], self.columns, Path(out))
        return JudgeExport(self.benchmark, self.unit, len(rows), per_model, jsonl, csv_path, rows)

    def read_labels(self, path: Path | str, decisions: Decisions) -> tuple[str, dict[str, Any]]:
        """(annotator, {item_id: label or rating}) of one labelled file; raise on any bad row."""
        path = Path(path)
        labels: dict[str, Any] = {}
        names: set[str] = set()
        for line, record in read_records(path, ("item_id", self.field)):
            where = f"{path}:{line}"
            item = str(record.get("item_id") or "").strip()
            if item not in decisions.items:
                raise MmcurateError(f"{where}: item_id {item!r} is not a decision of the given evaluations")
            if str(record.get(self.field) or "").strip() == "":
                continue  # not labelled by this annotator
            if item in labels:
                raise MmcurateError(f"{where}: item_id {item!r} labelled twice")
            labels[item] = self.human_value(decisions.items[item], record.get(self.field), where)
            annotator = str(record.get("annotator") or "").strip()
            if annotator:
                names.add(annotator)
        if len(names) > 1:
            raise MmcurateError(f"{path}: one file per annotator, found annotators {sorted(names)}")
        return (names.pop() if names else path.stem), labels

    def import_labels(
        self,
        release: Path | str,
        folders: Sequence[Path | str],
        files: Sequence[Path | str],
        out: Path | str,
        force: bool = False,
    ) -> JudgeImport:
        """Validate labelled files against the evaluations' decisions; write ``out/judge_agreement.{json,md}``
        (refused over an earlier import's unless ``force``)."""
        release, out = labels_import(release, files, out, RESULTS, force)
        decisions = self.read_decisions(release, folders)
        labels: dict[str, dict[str, Any]] = {}
        for file in files:
            name, mine = self.read_labels(file, decisions)
            if name in labels:
                raise MmcurateError(f"{file}: annotator {name!r} already given by another file")
            labels[name] = mine
        labelled = {i for ls in labels.values() for i in ls}
        if not labelled:
            raise MmcurateError("no labelled item in the given files")
        report, between = self.agreement(decisions, labels)
        text = self.markdown(report)
        out.mkdir(parents=True, exist_ok=True)
        path = out / RESULTS[0]
        path.write_text(
            json.dumps(
                {
                    "release": str(release),
                    "benchmark": self.benchmark,
                    "evaluations": [str(f) for f in folders],
                    "annotators": sorted(labels),
                    "items": len(labelled),
                    "agreement": report,
                    "between_annotators": between,
                },
                indent=2,
                sort_keys=True,
            )
            + "\n",
            encoding="utf-8",
        )
        (out / RESULTS[1]).write_text(text, encoding="utf-8")
        return JudgeImport(self.benchmark, sorted(labels), len(labelled), report, text, path)


def number(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"
