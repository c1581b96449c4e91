"""Human verification: kappas on hand-computed tables, export/import round trip, CLI."""
from __future__ import annotations

import csv
import json
import math

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mmcurate.annotation.human.agreement import agreement_summary, cohen_kappa, fleiss_kappa, raw_agreement
from mmcurate.annotation.human.citations import QUESTIONS, export_batch, import_labels, read_labels
from mmcurate.releases.reflvqa_tables import DOCUMENTS, QA
from mmcurate.core.errors import MmcurateError

# Wikipedia's worked Fleiss example: 10 items, 14 raters, 5 categories -> kappa 0.20993
WIKI = [
    [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
]
# 3 annotators x 4 items, by hand: P_i = 1, 1/3, 1, 1/3 -> P = 2/3; p_yes = p_no = 1/2 -> P_e = 1/2
THREE = [["yes", "yes", "yes"], ["yes", "yes", "no"], ["no", "no", "no"], ["yes", "no", "no"]]


def test_cohen_kappa_by_hand():
    # p_o = 3/4; p_e = 1/2 * 1/4 + 1/2 * 3/4 = 1/2 -> kappa = (3/4 - 1/2) / (1/2) = 1/2
    assert cohen_kappa(["yes", "yes", "no", "no"], ["yes", "no", "no", "no"]) == pytest.approx(0.5)
    assert cohen_kappa(["yes", "no"], ["yes", "no"]) == pytest.approx(1.0)
    assert math.isnan(cohen_kappa(["yes", "yes"], ["yes", "yes"]))


def test_fleiss_kappa_by_hand():
    ratings = [[str(j) for j, count in enumerate(row) for _ in range(count)] for row in WIKI]
    assert fleiss_kappa(ratings) == pytest.approx(0.20993, abs=1e-5)
    assert fleiss_kappa(THREE) == pytest.approx(1 / 3)
    assert raw_agreement(THREE) == 0.5
    assert math.isnan(fleiss_kappa([["no"] * 3] * 2))
    with pytest.raises(ValueError):
        fleiss_kappa([["yes", "no"], ["yes"]])


def test_agreement_summary_uses_common_items():
    summary = agreement_summary({"a": {"1": "yes", "2": "no", "3": "yes"}, "b": {"1": "yes", "2": "yes"}})
    assert summary == {"annotators": 2, "items": 2, "measure": "cohen", "kappa": 0.0, "raw": 0.5}
    assert agreement_summary({"a": {"1": "yes"}})["measure"] is None


@pytest.fixture
def release(tmp_path):
    """A RefLVQA release folder as releases/ writes it: data/<config>-00000-of-00001.parquet."""
    def sentence(i, text, cites=(), images=()):
        return {"index": i, "text": text, "fact_checkable": bool(cites or images), "text_citations": list(cites),
                "image_citations": list(images), "flagged": False}

    qa = [
        {"sample_id": "s1", "source_id": "p1/c1", "question": "Q1?", "images": ["aa" * 32], "answer": "A. B. C.",
         "sentences": [sentence(0, "A.", ["d1"]), sentence(1, "B."), sentence(2, "C.", ["d2"], ["image:" + "bb" * 32])],
         "meta": "{}"},
        {"sample_id": "s2", "source_id": "p2/c1", "question": "Q2?", "images": ["aa" * 32], "answer": "D. E.",
         "sentences": [sentence(0, "D.", ["d1"]), sentence(1, "E.", ["d2"])], "meta": "{}"},
        {"sample_id": "s3", "source_id": "p3/c1", "question": "Q3?", "images": ["cc" * 32], "answer": "F.",
         "sentences": [sentence(0, "F.", ["d3"])], "meta": "{}"},
    ]
    docs = [
        {"doc_id": "d1", "modality": "text", "text": "Doc one.", "image": None, "title": "One", "provenance": "{}"},
        {"doc_id": "d2", "modality": "text", "text": "Doc two.", "image": None, "title": "", "provenance": "{}"},
        {"doc_id": "d3", "modality": "text", "text": "Doc three.", "image": None, "title": "Three", "provenance": "{}"},
        {"doc_id": "image:" + "bb" * 32, "modality": "image", "text": None, "image": "bb" * 32, "title": None,
         "provenance": "{}"},
    ]
    root = tmp_path / "release"
    (root / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(qa, schema=QA), root / "data" / "qa-00000-of-00001.parquet")
    pq.write_table(pa.Table.from_pylist(docs, schema=DOCUMENTS), root / "data" / "documents-00000-of-00001.parquet")
    return root


def labelled_copy(batch, path, annotator, support, grounded=None, needs=None):
    """Fill the exported JSONL batch with labels; write CSV or JSONL by the path's suffix."""
    rows = [json.loads(line) for line in batch.read_text().splitlines()]
    for i, row in enumerate(rows):
        row["documents_support"] = support[i]
        row["sentence_grounded"] = (grounded or ["yes"] * len(rows))[i]
        row["needs_verification"] = (needs or ["yes"] * len(rows))[i]
        row["annotator"] = annotator
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            for r in rows:
                writer.writerow({**r, "document_ids": ";".join(r["document_ids"])})
    return path


def test_export_samples_cited_sentences(release, tmp_path):
    result = export_batch(release, 4, tmp_path / "batch", seed=1)
    assert (result.items, result.available) == (4, 5)  # sentence s1:1 has no citation
    rows = [json.loads(line) for line in result.jsonl.read_text().splitlines()]
    ids = [r["item_id"] for r in rows]
    assert len(set(ids)) == 4 and set(ids) <= {"s1:0", "s1:2", "s2:0", "s2:1", "s3:0"}
    assert all(r[q] == "" for r in rows for q in (*QUESTIONS, "annotator"))
    with result.csv.open(newline="") as handle:
        assert [r["item_id"] for r in csv.DictReader(handle)] == ids
    again = export_batch(release, 4, tmp_path / "batch2", seed=1)
    assert again.jsonl.read_text() == result.jsonl.read_text()  # seeded
    c = next(r for r in [json.loads(x) for x in export_batch(release, 5, tmp_path / "all").jsonl.read_text().splitlines()]
             if r["item_id"] == "s1:2")
    assert c["document_ids"] == ["d2", "image:" + "bb" * 32] and "[d2] Doc two." in c["documents"]


def test_round_trip_two_annotators_cohen(release, tmp_path):
    batch = export_batch(release, 4, tmp_path / "batch", seed=0).jsonl
    a = labelled_copy(batch, tmp_path / "ann_a.csv", "alice", ["yes", "yes", "no", "no"])
    b = labelled_copy(batch, tmp_path / "ann_b.jsonl", "bob", ["yes", "no", "no", "no"])
    result = import_labels(release, [a, b], tmp_path / "verified")
    assert result.annotators == ["alice", "bob"] and result.items == 4
    support = result.agreement["documents_support"]
    assert support["measure"] == "cohen" and support["kappa"] == pytest.approx(0.5) and support["raw"] == 0.75
    assert result.agreement["sentence_grounded"]["kappa"] is None  # all "yes": undefined
    assert result.agreement["sentence_grounded"]["raw"] == 1.0
    table = pl.read_parquet(result.path)
    # strict majority of 2 needs both: only the first item has two "yes" for support
    assert table["human_verified"].sum() == 1 and result.verified == 1
    first = json.loads(batch.read_text().splitlines()[0])["item_id"]
    assert table.filter(pl.col("human_verified"))["item_id"].to_list() == [first]
    report = json.loads(result.agreement_path.read_text())
    assert report["agreement"]["documents_support"]["kappa"] == pytest.approx(0.5)
    assert not any(p.name.startswith("human") for p in release.rglob("*"))  # release untouched


def test_round_trip_three_annotators_fleiss(release, tmp_path):
    batch = export_batch(release, 4, tmp_path / "batch", seed=0).jsonl
    files = [labelled_copy(batch, tmp_path / f"{name}.csv", name, [THREE[i][k] for i in range(4)])
             for k, name in enumerate(["ann1", "ann2", "ann3"])]
    result = import_labels(release, files, tmp_path / "verified")
    support = result.agreement["documents_support"]
    assert support["measure"] == "fleiss"
    assert support["kappa"] == pytest.approx(1 / 3) and support["raw"] == 0.5
    assert result.verified == 2  # items 1 (3 yes) and 2 (2 of 3 yes)


def test_bad_labels_name_file_and_line(release, tmp_path):
    batch = export_batch(release, 3, tmp_path / "batch", seed=0).jsonl
    bad = labelled_copy(batch, tmp_path / "bad.csv", "carol", ["yes", "maybe", "no"])
    second = json.loads(batch.read_text().splitlines()[1])["item_id"]
    line = next(i for i, text in enumerate(bad.read_text().splitlines(), 1) if text.startswith(second + ","))
    with pytest.raises(MmcurateError, match=rf"bad\.csv:{line}: documents_support is 'maybe'; expected yes or no"):
        import_labels(release, [bad], tmp_path / "out")
    partial = labelled_copy(batch, tmp_path / "partial.jsonl", "dan", ["yes", "", "no"])
    with pytest.raises(MmcurateError, match=r"partial\.jsonl:2: documents_support is empty"):
        read_labels(partial)
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text(json.dumps({"item_id": "nope:0", **{q: "yes" for q in QUESTIONS}}) + "\n")
    with pytest.raises(MmcurateError, match=r"unknown\.jsonl:1: item_id 'nope:0'"):
        import_labels(release, [unknown], tmp_path / "out")
    with pytest.raises(MmcurateError, match="immutable"):
        import_labels(release, [bad], release / "human")


def test_cli_export_and_import(release, tmp_path):
    from typer.testing import CliRunner

    from mmcurate.cli import app

    runner = CliRunner()
    out = runner.invoke(app, ["annotate", "export", str(release), "--n", "4", "--seed", "0", "--out", str(tmp_path / "b")])
    assert out.exit_code == 0, out.output
    assert "exported 4 items" in out.output
    batch = tmp_path / "b" / "batch.jsonl"
    a = labelled_copy(batch, tmp_path / "a.jsonl", "alice", ["yes", "yes", "no", "no"])
    b = labelled_copy(batch, tmp_path / "b.jsonl", "bob", ["yes", "no", "no", "no"])
    out = runner.invoke(app, ["annotate", "import", str(release), str(a), str(b), "--out", str(tmp_path / "v")])
    assert out.exit_code == 0, out.output
    assert "documents_support: cohen kappa 0.500, raw agreement 0.750 over 4 items" in out.output
    assert (tmp_path / "v" / "human_verified.parquet").is_file()
