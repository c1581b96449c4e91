"""DocVQA adapter over its bundled fixture: ``data`` list, page images under the split folder."""

from __future__ import annotations

from mmcurate.sources.ingest import IngestResult

SOURCE = "docvqa"


def test_samples_are_documents(result: IngestResult, builder, rows) -> None:
    samples = rows(result)
    assert result.samples == 3 and set(samples) == {"49153", "49154", "49155"}
    invoice = samples["49153"]
    assert invoice["question"] == "What is the total amount on the invoice?" and invoice["answers"] == ["$1,250"]
    assert invoice["meta"]["domain"] == "Document" and invoice["meta"]["image"] == "documents/xnbl0037_1.png"
    assert invoice["meta"]["ucsf_document_id"] == "xnbl0037" and invoice["meta"]["page"] == "1"
    assert samples["49154"]["images"] == samples["49155"]["images"]  # two questions on the letter page


def test_missing_page_is_quarantined(result: IngestResult, rejected) -> None:
    assert rejected(result) == {"val_v1.0.json:data[3]": "image file missing: documents/missing_page.png"}


def test_unlabelled_test_split_is_skipped_not_quarantined(result: IngestResult) -> None:
    assert result.skipped == {"test: no answers in this split: not curatable": 2}
