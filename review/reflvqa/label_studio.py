"""RefLVQA's citation verification (seed 004, 3.3-3.4; Table 3) as a Label Studio project
(``label_studio`` holds the project folder, the import and the refusals all reviews share).

Export: the batch ``review.reflvqa.citations.export_batch`` draws becomes ``tasks.json`` (one task per
item: the question and its image, the answer, the sentence, and every shown document, cited
first, each with its yes/no), ``citations.xml`` (the paper's three questions, every one
required, and the per-document support, optional as in the CSV path) and ``images/`` with the
question images and every image document.

Import: each annotation becomes the annotator's batch row and ``review.reflvqa.citations.import_labels``
computes agreement, kappa, Table 3 and the judge's F1 by the CSV path's rule.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import polars as pl

from ..batches import cell_list
from ..label_studio import (
    Annotation,
    choices_xml,
    field,
    image_xml,
    labelled_files,
    refuse_over_server_data,
    single_choice,
    write_images,
    write_project,
)
from .citations import LABELS, QUESTIONS, ExportResult, ImportResult, export_batch, import_labels, release_items

CONFIG = "citations"
PROMPTS = {
    "needs_verification": "Does the sentence need fact verification?",
    "documents_support": "Do the cited documents support the sentence? (no when none is cited)",
    "sentence_grounded": "Is the sentence grounded by the cited documents? (no when none is cited)",
}


def labeling_config() -> str:
    """The sentence in its context, the three questions, then each shown document (a Repeater
    over the task's ``documents``) with its own yes/no."""
    questions = "\n".join(
        f'  <Header value="{escape(PROMPTS[q])}"/>\n  {choices_xml(q, "sentence", LABELS)}' for q in QUESTIONS
    )
    support = choices_xml("document_support_{{idx}}", "document_{{idx}}", LABELS, required=False)
    return f"""<View>
  <Header value="Question"/>
  <Text name="question" value="$question"/>
  {image_xml("image", "$image")}
  <Header value="Answer"/>
  <Text name="answer" value="$answer"/>
  <Header value="Sentence to verify"/>
  <Text name="sentence" value="$sentence"/>
{questions}
  <Header value="Shown documents: does each support the sentence?"/>
  <Repeater on="$documents" indexFlag="{{{{idx}}}}">
    <View>
      <Text name="document_{{{{idx}}}}" value="$documents[{{{{idx}}}}].label"/>
      {image_xml("document_image_{{idx}}", "$documents[{{idx}}].image")}
      {support}
    </View>
  </Repeater>
</View>
"""


def _images(release: Path, shown: set[str]) -> dict[str, dict[str, Any] | None]:
    """Sample id -> question image of the ``shown`` samples; doc id -> image of every image document."""
    images: dict[str, dict[str, Any] | None] = {}
    qa = pl.read_parquet(sorted((release / "data").glob("qa-*.parquet")), columns=["sample_id", "images"])
    for row in qa.filter(pl.col("sample_id").is_in(sorted(shown))).to_dicts():
        images[row["sample_id"]] = (row["images"] or [None])[0]
    for config in ("documents", "knowledge_base"):
        table = pl.read_parquet(sorted((release / "data").glob(f"{config}-*.parquet")), columns=["doc_id", "image"])
        for row in table.filter(pl.col("image").is_not_null()).to_dicts():
            images.setdefault(row["doc_id"], row["image"])
    return images


def _task(item: dict[str, Any], urls: dict[str, str]) -> dict[str, Any]:
    cited, others = cell_list(item["document_ids"]), cell_list(item["rejected_ids"])
    texts = [
        *filter(None, str(item["documents"]).split("\n\n")),
        *filter(None, str(item["rejected_documents"]).split("\n\n")),
    ]
    documents = [
        {
            "doc_id": doc,
            "cited": index < len(cited),
            "label": f"{'cited' if index < len(cited) else 'not cited'}: {text}",
            "image": urls.get(doc, ""),
        }
        for index, (doc, text) in enumerate(zip([*cited, *others], texts))
    ]
    return {
        "data": {
            "item_id": item["item_id"],
            "question": item["question"],
            "image": urls.get(item["sample_id"], ""),
            "answer": item["answer"],
            "sentence": item["sentence"],
            "documents": documents,
        }
    }


def export_project(
    release: Path | str, n: int, out: Path | str, seed: int = 0, rejected: int | None = None, force: bool = False
) -> ExportResult:
    """The batch (``export_batch``, same refusals) and its Label Studio project files in ``out``."""
    release, out = Path(release), Path(out)
    refuse_over_server_data(out, force)
    batch = export_batch(release, n, out, seed=seed, rejected=rejected, force=force)
    items = [json.loads(line) for line in batch.jsonl.read_text(encoding="utf-8").splitlines() if line]
    urls = write_images(out, _images(release, {i["sample_id"] for i in items}))
    write_project(out, CONFIG, labeling_config(), [_task(item, urls) for item in items])
    return batch


def _row(annotation: Annotation) -> dict[str, Any]:
    documents = field(annotation.where, annotation.data.get("documents", []), "data.documents", list)
    for n, document in enumerate(documents):
        field(
            annotation.where,
            field(annotation.where, document, f"data.documents[{n}]", Mapping).get("doc_id"),
            f"data.documents[{n}].doc_id",
            str,
        )
    support = [single_choice(annotation, f"document_support_{i}", LABELS) for i in range(len(documents))]
    return {
        "item_id": annotation.item,
        **{q: single_choice(annotation, q, LABELS) for q in QUESTIONS},
        "document_ids": [d["doc_id"] for d in documents if d.get("cited")],
        "rejected_ids": [d["doc_id"] for d in documents if not d.get("cited")],
        "document_support": support if all(support) else [],
    }


def import_project(
    release: Path | str, exports: list[Path | str], out: Path | str, force: bool = False
) -> ImportResult:
    """Label Studio JSON exports -> ``import_labels`` (one JSONL file per annotator)."""
    known = {item["item_id"] for item in release_items(release)}
    with labelled_files(exports, known, "a sentence of this release's citations", _row) as files:
        return import_labels(release, files, out, force)
