"""The quality check of ReflectV (seed paper 002, appendix A.2, Table 6): rate trajectories
from the discarded, raw and clean subsets for logic and visual validity, by people and a model.

Export samples ``n`` dialogues (default 100, all when fewer) from each subset of a release,
seeded, and shows each chosen dialogue once, shuffled, under an opaque id: the subsets overlap
(every dialogue is raw, and a clean or discarded one too), so a dialogue drawn for two of
them is one item, rated once, and counts in both. The assessment is blind (appendix A.2): every
item, whatever its subset, is shown in one form, the dialogue's ``trajectory`` from the
release's ``dialogues`` config: its turns as ``<answer>/<think>/<tool_call>`` with the image
each turn sees (a marked image where the pipeline drew one), so only the content differs:

- ``clean`` (D_clean): dialogues released as multi-turn trajectories;
- ``discarded`` (D_noise): dialogues whose multi-turn chain the pipeline rejected: the
  trajectory filter discarded them, or a later stage (keyword, grounding, visual check,
  format) collapsed them to a QA pair;
- ``raw`` (D_raw): any dialogue as built or ingested, before every filter.

The batch is ``batch.jsonl`` and ``batch.csv`` (same rows: ``item_id``, ``question``,
``ground_truth``, ``trajectory``, ``images``; empty ``logic``, ``visual``, ``annotator``),
``images/`` (named by sha256) and ``key.jsonl`` (item -> sample and the subsets it was drawn
for), which is for the import, not for raters.

Import reads one rated file per annotator (CSV or JSONL as exported; ratings are integers
1 to 5, a row with both empty is an item not rated, a half-rated row is an error), and
optionally asks a model of the config to rate every item of the batch (``ModelRater``: the
images and text, a reply of exactly ``Logic: N`` and ``Visual: N`` read by the strict
retry-then-error rule). It writes ``ratings.parquet`` (one row per rater and item, with the
item's subsets) and the Table 6 rows (``table6.json``): per subset, the mean human and model
logic and visual scores over the items drawn for it, and their average.
"""

from __future__ import annotations

import csv
import json
import random
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from mmcurate.annotation.reflectv.formatting import MULTI
from mmcurate.core.errors import MmcurateError
from mmcurate.core.ids import stable_id
from mmcurate.core.images import ImageStore
from mmcurate.core.markdown import markdown_table
from mmcurate.core.tables import jsonl_objects, write_table
from mmcurate.models.accounting import failed_calls
from mmcurate.models.client import ModelPool
from mmcurate.models.labels import ask_parsed
from mmcurate.models.requests import ChatRequest
from mmcurate.releases.reader import refuse_inside_release
from mmcurate.releases.reflectv.schema import DISCARDED
from mmcurate.review.batches import prepare_batch_folder, read_records, refuse_over_results

SUBSETS = ("discarded", "raw", "clean")  # Table 6's D_noise, D_raw, D_clean
LABELS = {"discarded": "D_noise (discarded)", "raw": "D_raw (unfiltered)", "clean": "D_clean (released)"}
CRITERIA = ("logic", "visual")
RESULTS = ("ratings.parquet", "table6.json", "table6.md")  # what an import writes to its --out
COLUMNS = ("item_id", "question", "ground_truth", "trajectory", "images", *CRITERIA, "annotator")
RATINGS = pa.schema(
    [
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("subsets", pa.list_(pa.string()), nullable=False),  # those it was drawn for
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("rater", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),  # human | model
        pa.field("logic", pa.int32(), nullable=False),
        pa.field("visual", pa.int32(), nullable=False),
    ]
)
RATE_TEMPLATE = "reflectv.quality.rate.v1"
RATE_SYSTEM = (
    "You rate training examples for a vision-language model that reflects on its own answers. An "
    "example is a question about an image, its ground-truth answer and a trajectory of answers and "
    "reflections, some pointing at marks drawn on the image; the images come in the order the "
    "trajectory uses them. Rate two things from 1 (very poor) to 5 (excellent).\n"
    "Logic: is the reasoning coherent, does each step follow from the one before, does it end at "
    "the ground truth?\n"
    "Visual: do the reflections point at the right parts of the image, and do the marks show them?\n"
    "Reply in exactly two lines:\nLogic: <1-5>\nVisual: <1-5>"
)
RATE_REMINDER = "Your reply could not be read. Reply in exactly two lines:\nLogic: <1-5>\nVisual: <1-5>"
_RATING = re.compile(r"\s*logic\s*:\s*([1-5])\s*\n+\s*visual\s*:\s*([1-5])\s*", re.IGNORECASE)


def parse_rating(text: str) -> tuple[int, int] | None:
    """(logic, visual) of a reply of exactly the two lines, else None."""
    match = _RATING.fullmatch(text)
    return (int(match.group(1)), int(match.group(2))) if match else None


# ---------------------------------------------------------------------------- export
def _frame(release: Path, config: str) -> pl.DataFrame:
    paths = sorted((release / "data").glob(f"{config}-*.parquet"))
    if not paths:
        raise MmcurateError(f"{release}: no data/{config}-*.parquet (is this a ReflectV release folder?)")
    return pl.read_parquet([str(p) for p in paths])


def _noise(row: dict[str, Any]) -> bool:
    """A dialogue whose multi-turn chain the pipeline rejected (by the filter, or a later stage)."""
    return row["fate"] == DISCARDED or row["chain_issue"] is not None


def release_items(release: Path | str) -> dict[str, list[dict[str, Any]]]:
    """Every candidate item of each subset, in a stable order (by sample id), all in one form."""
    frame = _frame(Path(release), "dialogues")
    if "trajectory" not in frame.columns:
        raise MmcurateError(
            f"{release}: its dialogues have no rendered trajectory (a release made before Table 6 "
            "was blind); re-curate it to rate it"
        )
    dialogues = frame.to_dicts()

    def shown(row: dict[str, Any]) -> dict[str, Any]:
        return {
            "sample_id": row["sample_id"],
            "question": row["question"],
            "ground_truth": " | ".join(row["answers"]),
            "trajectory": "\n".join(f"Turn {t['turn']}: {t['text']}" for t in row["trajectory"]),
            "images": [t["image"] for t in row["trajectory"]],
        }

    items = {
        "discarded": [shown(r) for r in dialogues if _noise(r)],
        "raw": [shown(r) for r in dialogues],
        "clean": [shown(r) for r in dialogues if r["fate"] == MULTI],
    }
    return {subset: sorted(rows, key=lambda r: r["sample_id"]) for subset, rows in items.items()}


@dataclass(frozen=True)
class TrajectoryExport:
    items: int  # items in the batch, each dialogue once
    drawn: dict[str, int]  # subset -> items drawn for it (an item may be drawn for two)
    available: dict[str, int]
    jsonl: Path
    csv: Path
    key: Path


def _image_file(folder: Path, image: dict[str, Any]) -> str:
    """Write an embedded image struct into ``folder`` under its store name; return that name."""
    name = Path(image["path"]).name
    target = folder / name
    if not target.exists():
        target.write_bytes(image["bytes"])
    return name


def export_trajectories(
    release: Path | str, out: Path | str, n: int = 100, seed: int = 0, force: bool = False
) -> TrajectoryExport:
    """Sample ``n`` items per subset (seeded) into ``out`` (see the module docstring); refused over
    a batch people already rated, unless ``force``."""
    if n < 1:
        raise MmcurateError(f"--n must be at least 1, got {n}")
    release, out = Path(release), Path(out)
    prepare_batch_folder(release, out, (*CRITERIA, "annotator"), force)
    candidates = release_items(release)
    if not any(candidates.values()):
        raise MmcurateError(f"{release}: the release holds no dialogue to rate")
    (out / "images").mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    drawn: dict[str, dict[str, Any]] = {}  # sample_id -> item: a dialogue drawn for two subsets is one item
    for subset in SUBSETS:
        pool = candidates[subset]
        for item in rng.sample(pool, min(n, len(pool))):
            entry = drawn.setdefault(
                item["sample_id"], {**item, "subsets": [], "item_id": stable_id("reflectv-quality", item["sample_id"])}
            )
            entry["subsets"].append(subset)
    chosen = list(drawn.values())
    rng.shuffle(chosen)
    rows = [
        {
            "item_id": c["item_id"],
            "question": c["question"],
            "ground_truth": c["ground_truth"],
            "trajectory": c["trajectory"],
            "images": [_image_file(out / "images", i) for i in c["images"]],
            "logic": "",
            "visual": "",
            "annotator": "",
        }
        for c in chosen
    ]
    jsonl = out / "batch.jsonl"
    jsonl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    csv_path = out / "batch.csv"
    with csv_path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for r in rows:
            writer.writerow({**r, "images": ";".join(r["images"])})
    key = out / "key.jsonl"
    key.write_text(
        "".join(
            json.dumps(
                {
                    "item_id": c["item_id"],
                    "subsets": c["subsets"],
                    "sample_id": c["sample_id"],
                    "images": row["images"],
                    "question": c["question"],
                    "ground_truth": c["ground_truth"],
                    "trajectory": c["trajectory"],
                },
                ensure_ascii=False,
            )
            + "\n"
            for c, row in zip(chosen, rows)
        ),
        encoding="utf-8",
    )
    counts = {s: sum(s in c["subsets"] for c in chosen) for s in SUBSETS}
    return TrajectoryExport(len(chosen), counts, {s: len(candidates[s]) for s in SUBSETS}, jsonl, csv_path, key)


# ---------------------------------------------------------------------------- import
def read_key(batch: Path | str) -> dict[str, dict[str, Any]]:
    """item_id -> key row, each with ``subsets`` (a batch exported before items were shown once
    has one ``subset`` per row)."""
    path = Path(batch) / "key.jsonl"
    if not path.is_file():
        raise MmcurateError(f"{batch}: no key.jsonl (give the folder written by export-trajectories)")
    images = (Path(batch) / "images").resolve()
    key = {}
    for line, record in jsonl_objects(path, "key row"):
        names = record.get("images")
        if not isinstance(names, list) or not all(_inside(images, name) for name in names):
            raise MmcurateError(
                f"{path}:{line}: images must name files of {images} (the export's images/), got "
                f"{names!r}; nothing outside the batch folder is read"
            )
        key[record["item_id"]] = {**record, "subsets": record.get("subsets") or [record["subset"]]}
    return key


def _inside(folder: Path, name: object) -> bool:
    """Whether ``name`` is a plain file name in ``folder`` (no path, nor a link out of it)."""
    return (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and Path(name).name == name
        and "\\" not in name
        and (folder / name).resolve().parent == folder
    )


def read_ratings(path: Path | str, known: set[str]) -> tuple[str, dict[str, tuple[int, int]]]:
    """(annotator, {item_id: (logic, visual)}) of one rated file; raise on any bad row."""
    path = Path(path)
    ratings: dict[str, tuple[int, int]] = {}
    names: set[str] = set()
    for line, record in read_records(path, ("item_id", *CRITERIA), "rated"):
        where = f"{path}:{line}"
        item = str(record.get("item_id") or "").strip()
        if item not in known:
            raise MmcurateError(f"{where}: item_id {item!r} is not an item of this batch")
        values = {c: "" if record.get(c) is None else str(record.get(c)).strip() for c in CRITERIA}
        if all(v == "" for v in values.values()):
            continue
        for criterion, value in values.items():
            if value not in {"1", "2", "3", "4", "5"}:
                shown = "empty" if value == "" else repr(record.get(criterion))
                raise MmcurateError(f"{where}: {criterion} is {shown}; expected an integer from 1 to 5")
        if item in ratings:
            raise MmcurateError(f"{where}: item_id {item!r} rated twice")
        if str(record.get("annotator") or "").strip():
            names.add(str(record["annotator"]).strip())
        ratings[item] = (int(values["logic"]), int(values["visual"]))
    if len(names) > 1:
        raise MmcurateError(f"{path}: one file per annotator, found annotators {sorted(names)}")
    return (names.pop() if names else path.stem), ratings


class ModelRater:
    """A model of the config rating every item of a batch (images from the batch folder)."""

    def __init__(self, pool: ModelPool, model: str, store: ImageStore) -> None:
        if not pool.settings.model(model).vision:
            raise MmcurateError(f"rater model {model!r} cannot see images (vision: false)")
        self.pool, self.model, self.store = pool, model, store

    def rate(self, batch: Path, key: dict[str, dict[str, Any]]) -> tuple[dict[str, tuple[int, int]], list[str]]:
        """({item_id: (logic, visual)}, the errors of the items the model could not rate)."""
        items = sorted(key.values(), key=lambda r: r["item_id"])
        requests = []
        for item in items:
            shas = [self.store.put((batch / "images" / name).read_bytes()) for name in item["images"]]
            text = (
                f"Question: {item['question']}\nGround truth: {item['ground_truth']}\nTrajectory:\n{item['trajectory']}"
            )
            parts = [*({"type": "image", "sha256": sha} for sha in shas), {"type": "text", "text": text}]
            requests.append(
                ChatRequest(
                    item["item_id"],
                    [{"role": "system", "content": RATE_SYSTEM}, {"role": "user", "content": parts}],
                    RATE_TEMPLATE,
                    max_tokens=16,
                )
            )
        try:
            replies = ask_parsed(
                self.pool.client(self.model),
                requests,
                [parse_rating] * len(requests),
                RATE_REMINDER,
                "quality",
                "'Logic: N' and 'Visual: N'",
            )
        finally:
            self.pool.release(self.model)
        rated = {item["item_id"]: reply.label for item, reply in zip(items, replies) if reply.ok}
        return rated, [reply.error or "no rating" for reply in replies if not reply.ok]


@dataclass(frozen=True)
class TrajectoryImport:
    annotators: list[str]
    table: list[dict[str, Any]]  # Table 6 rows
    markdown: str
    ratings_path: Path
    table_path: Path
    rater_problem: str | None = None  # the model rater failed on some items: how many, and why


def _mean(values: list[int]) -> float | None:
    return round(sum(values) / len(values), 2) if values else None


def table6(key: dict[str, dict[str, Any]], ratings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per subset: human and model means of logic and visual, and their average."""
    by: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for r in ratings:
        for subset in r["subsets"]:  # an item drawn for two subsets counts in both
            for criterion in CRITERIA:
                by[(subset, r["kind"], criterion)].append(r[criterion])
    rows = []
    for subset in SUBSETS:
        row: dict[str, Any] = {"subset": LABELS[subset], "items": sum(subset in k["subsets"] for k in key.values())}
        for kind in ("human", "model"):
            for criterion in CRITERIA:
                row[f"{kind}_{criterion}"] = _mean(by[(subset, kind, criterion)])
        for criterion in CRITERIA:
            means = [
                row[f"{kind}_{criterion}"] for kind in ("human", "model") if row[f"{kind}_{criterion}"] is not None
            ]
            row[f"average_{criterion}"] = round(sum(means) / len(means), 2) if means else None
        rows.append(row)
    return rows


def import_trajectory_ratings(
    batch: Path | str,
    files: Sequence[Path | str],
    out: Path | str,
    rater: ModelRater | None = None,
    force: bool = False,
) -> TrajectoryImport:
    """Validate rated files (and ask the model rater), write ratings and the Table 6 rows
    (refused over an earlier import's unless ``force``)."""
    batch, out = Path(batch), Path(out)
    refuse_inside_release(out, "--out")
    refuse_over_results(out, RESULTS, force)
    key = read_key(batch)
    if not files and rater is None:
        raise MmcurateError("give at least one rated file, or a rater model (--rater)")
    rows: list[dict[str, Any]] = []
    annotators: list[str] = []
    for file in files:
        name, ratings = read_ratings(file, set(key))
        if name in annotators:
            raise MmcurateError(f"{file}: annotator {name!r} already given by another file")
        annotators.append(name)
        rows += [
            {
                "item_id": item,
                "subsets": key[item]["subsets"],
                "sample_id": key[item]["sample_id"],
                "rater": name,
                "kind": "human",
                "logic": logic,
                "visual": visual,
            }
            for item, (logic, visual) in ratings.items()
        ]
    errors: list[str] = []
    problem = None
    if rater is not None:
        rated, errors = rater.rate(batch, key)
        if errors:
            problem = failed_calls(rater.model, len(errors), len(key), errors[0])
            if not rated:
                raise MmcurateError(
                    f"the rater rated no item: {problem}; nothing written (rerun: rated items are cached)"
                )
        rows += [
            {
                "item_id": item,
                "subsets": key[item]["subsets"],
                "sample_id": key[item]["sample_id"],
                "rater": rater.model,
                "kind": "model",
                "logic": logic,
                "visual": visual,
            }
            for item, (logic, visual) in sorted(rated.items())
        ]
    if not rows:
        raise MmcurateError("no rated item in the given files")
    out.mkdir(parents=True, exist_ok=True)
    ratings_path = write_table(pa.Table.from_pylist(rows, schema=RATINGS), out / RESULTS[0])
    table = table6(key, rows)
    markdown = markdown_table(table)
    table_path = out / RESULTS[1]
    table_path.write_text(
        json.dumps(
            {
                "batch": str(batch),
                "annotators": annotators,
                "model": rater.model if rater else None,
                "model_errors": len(errors),
                "model_problem": problem,
                "table": table,
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    (out / RESULTS[2]).write_text(markdown + "\n", encoding="utf-8")
    return TrajectoryImport(annotators, table, markdown, ratings_path, table_path, problem)
