"""The evaluation judge checked against people (``review.judges``: DeflectionBench's Table 7,
seed 003 appendix E; RefLVQA's evaluator checks, seed 004) as a Label Studio project
(``label_studio`` holds the project folder, the import and the refusals all reviews share).

Export: the blind batch the benchmark's ``JudgeReview.export`` draws (the same decisions, the
same seeded balance, the judge's decision never shown) becomes ``tasks.json``: per decision
the batch row's columns, the question's image from the release (``JudgeReview.samples``) and
the choices a person may give, exactly the CSV path's vocabulary (``JudgeReview.choices``:
CORRECT / INCORRECT / NOT_ATTEMPTED, the SimpleQA rubric's three labels; RefLVQA 1 / 0.5 / 0,
relevance 1-7) as Label Studio's dynamic choices, so one config serves both scales;
``judges.xml`` shows the benchmark's fields (``FIELDS``) and one required single choice named
as the CSV column (``label`` or ``rating``).

Import: each annotation becomes the annotator's batch row and ``JudgeReview.import_labels``
computes agreement and kappa (Table 7) or Pearson and kappa by the CSV path's rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import polars as pl

from .judges import LABEL_COLUMNS, JudgeExport, JudgeImport, JudgeReview
from .label_studio import (
    Annotation,
    choices_xml,
    dynamic_choices,
    image_xml,
    labelled_files,
    refuse_over_server_data,
    single_choice,
    write_images,
    write_project,
)

CONFIG = "judges"
# (header, batch column) shown per benchmark, then the question's image after the question
FIELDS = {
    "deflectionbench": (
        ("Model", "model"),
        ("Scenario", "scenario"),
        ("Question", "question"),
        ("Gold answers", "gold_answers"),
        ("The model's answer", "answer"),
    ),
    "reflvqa": (
        ("Model + setting", "model"),
        ("Question", "question"),
        ("Answer", "answer"),
        ("Metric", "metric"),
        ("Statement to rate", "statement"),
        ("Documents it cites", "documents"),
        ("Scale", "scale"),
    ),
}
ASK = {
    "deflectionbench": "Grade the model's answer against the gold answers (SimpleQA rubric)",
    "reflvqa": "Rate the statement for the metric, on its scale",
}


def labeling_config(review: JudgeReview) -> str:
    lines = []
    for header, field in FIELDS[review.benchmark]:
        lines.append(f'  <Header value="{escape(header)}"/>')
        lines.append(f'  <Text name="{field}" value="${field}"/>')
        if field == "question":
            lines.append(f"  {image_xml('image', '$image')}")
    lines += [f'  <Header value="{escape(ASK[review.benchmark])}"/>', f"  {choices_xml(review.field, 'answer')}"]
    return "<View>\n" + "\n".join(lines) + "\n</View>\n"


def _images(release: Path, config: str, samples: set[str]) -> dict[str, dict[str, Any] | None]:
    """Sample id -> its first image, for the ``samples`` of the release's ``config`` (none when
    the config has no ``images`` column)."""
    paths = sorted((release / "data").glob(f"{config}-*.parquet"))
    if "images" not in pl.read_parquet_schema(paths[0]):
        return {}
    table = pl.read_parquet(paths, columns=["sample_id", "images"]).filter(pl.col("sample_id").is_in(sorted(samples)))
    return {r["sample_id"]: (r["images"] or [None])[0] for r in table.to_dicts()}


def export_project(
    review: JudgeReview,
    release: Path | str,
    folders: Sequence[Path | str],
    out: Path | str,
    n: int = 100,
    seed: int = 0,
    force: bool = False,
) -> JudgeExport:
    """The blind batch (``review.export``, same refusals) and its Label Studio project in ``out``."""
    release, out = Path(release), Path(out)
    refuse_over_server_data(out, force)
    batch = review.export(release, folders, out, n=n, seed=seed, force=force)
    urls = write_images(out, _images(release, review.samples, {r["sample_id"] for r in batch.rows}))
    shown = [c for c in review.columns if c not in LABEL_COLUMNS]
    tasks = [
        {
            "data": {
                **{c: row[c] for c in shown},
                "image": urls.get(row["sample_id"], ""),
                "choices": dynamic_choices(review.choices(row)),
            }
        }
        for row in batch.rows
    ]
    write_project(out, CONFIG, labeling_config(review), tasks)
    return batch


def import_project(
    review: JudgeReview,
    release: Path | str,
    folders: Sequence[Path | str],
    exports: Sequence[Path | str],
    out: Path | str,
    force: bool = False,
) -> JudgeImport:
    """Label Studio JSON exports -> ``review.import_labels`` (one JSONL file per annotator)."""
    decisions = review.read_decisions(release, folders).items

    def row(annotation: Annotation) -> dict[str, Any]:
        allowed = review.choices(decisions[annotation.item])
        return {"item_id": annotation.item, review.field: single_choice(annotation, review.field, allowed)}

    with labelled_files(exports, decisions.keys(), "a decision of the given evaluations", row) as files:
        return review.import_labels(release, folders, files, out, force)
