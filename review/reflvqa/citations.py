"""Human verification of RefLVQA citations (seed paper 3.3-3.4): labelling export and import.

Export samples N items from a release. The population is every fact-checkable sentence the
entailment judge saw documents for: an item is one such sentence, cited or not, shown with
the question, the answer, its cited documents (``document_ids``) and the other documents the
judge was shown for it (``rejected_ids``: retrieved, judged, not cited; from the ledger).
Each annotator fills three yes/no columns, the paper's annotation questions:

- ``needs_verification``: does the sentence need fact verification?
- ``documents_support``: do the cited documents support the sentence? (no when none is cited)
- ``sentence_grounded``: is the sentence grounded by the cited documents? (no when none is cited)

and may fill ``annotator`` (else the file name stands for the annotator). A fourth column,
``document_support``, takes one yes/no per shown document (``document_ids`` then
``rejected_ids``, ``;``-separated in the CSV): does this document support the sentence?
The batch is written twice, ``batch.jsonl`` and ``batch.csv``, with the same rows.

Sampling, so that the judge's precision, recall and F1 estimate those of every judged
(sentence, document) pair: sentences are drawn uniformly at random (seeded) from the
population, uncited ones included, and each drawn sentence shows every document judged for
it (``rejected=None``, the default: every pair of a drawn sentence is labelled, weight 1).
With ``rejected=K`` at most K of a sentence's R uncited documents are drawn uniformly
(seeded per item), and the import weights each labelled one by R/K' (K' the number shown),
the inverse of its inclusion probability: the weighted counts of true and false positives
and negatives are unbiased estimates of the population's. (Showing only cited sentences and
the best-ranked rejections, as this export did before, under-samples the false negatives,
so recall and F1 came out high.)

Import reads one labelled file per annotator (CSV or JSONL, as exported), validates every
label (a bad one raises one line naming ``file:line``), and writes, beside and never into
the immutable release, ``human_verified.parquet``: one row per labelled item with the yes
counts and ``human_verified`` = the sentence has a cited document and a strict majority of
its annotators said the documents support it AND that it is grounded. Agreement per
question goes to ``agreement.json``: Cohen's kappa for two annotators, Fleiss' kappa for
three or more, and raw agreement, over the items every annotator labelled. A row whose three
labels are all empty is an item the annotator did not do; a partly filled row is an error.
``document_support`` may be left empty (the three questions alone); filled, it needs one
label per shown document.

From the labels (the majority of an item's annotators; ties left out), ``agreement.json``
also holds the paper's Table 3 (share of sentences needing verification, over all labelled
sentences; support rate of cited documents per modality and share of grounded sentences,
over the cited ones) and the entailment judge's precision, recall and F1 against the human
support labels, per document modality (seed 004, Table 2): a cited document is the judge's
"supports", an uncited judged one its "does not support"; the counts are weighted as above
and ``sampling`` says how the batch was drawn.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from mmcurate.core.errors import MmcurateError
from mmcurate.core.plural import counted
from mmcurate.core.tables import write_table
from mmcurate.releases.manifest import MANIFEST, load_manifest
from mmcurate.review.agreement import agreement_summary
from mmcurate.review.batches import cell_list, labels_import, prepare_batch_folder, read_records, write_batch

QUESTIONS = ("needs_verification", "documents_support", "sentence_grounded")
LABELS = ("yes", "no")
COLUMNS = (
    "item_id",
    "sample_id",
    "sentence_index",
    "question",
    "answer",
    "sentence",
    "document_ids",
    "documents",
    "rejected_ids",
    "rejected_documents",
    *QUESTIONS,
    "document_support",
    "annotator",
)
SAMPLING = (
    "sentences drawn uniformly from every sentence with a cited or judged document; each labelled "
    "(sentence, document) pair weighted by the inverse of its inclusion probability (1 when every judged "
    "document of the sentence was shown): precision, recall and F1 are ratios of the weighted counts, which "
    "estimate the counts over every judged pair without bias"
)
JUDGED = ("citation.text", "citation.image")  # ledger checks of the citation stage (annotation.reflvqa.citations)
DECIDED = ("entail", "reject")  # the judge's verdicts (an ``error`` decided nothing)
DOC_SEP = "\n\n"
RESULTS = ("human_verified.parquet", "agreement.json")  # what an import writes to its --out
HUMAN_VERIFIED = pa.schema(
    [
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("sentence_index", pa.int32(), nullable=False),
        pa.field("annotators", pa.int32(), nullable=False),
        *(pa.field(f"{q}_yes", pa.int32(), nullable=False) for q in QUESTIONS),
        pa.field("human_verified", pa.bool_(), nullable=False),
    ]
)


def item_id(sample_id: str, index: int) -> str:
    return f"{sample_id}:{index}"


def _shards(release: Path, config: str) -> list[str]:
    paths = sorted((release / "data").glob(f"{config}-*.parquet"))
    if not paths:
        raise MmcurateError(f"{release}: no data/{config}-*.parquet (is this a RefLVQA release folder?)")
    return [str(p) for p in paths]


def _judged(release: Path) -> dict[tuple[str, int], list[str]]:
    """(sample_id, sentence index) -> documents the entailment judge decided on, best-ranked first."""
    path = release / "ledger.parquet"
    if not path.is_file():
        raise MmcurateError(f"{release}: no ledger.parquet (is this a RefLVQA release folder?)")
    ledger = pl.read_parquet(path, columns=["sample_id", "check", "context_id", "verdict", "detail"]).filter(
        pl.col("check").is_in(list(JUDGED)) & pl.col("verdict").is_in(list(DECIDED))
    )
    found: dict[tuple[str, int], list[tuple[int, str]]] = {}
    for row in ledger.to_dicts():
        detail = json.loads(row["detail"] or "{}")
        found.setdefault((row["sample_id"], int(detail["sentence"])), []).append(
            (int(detail.get("rank") or 0), row["context_id"])
        )
    return {key: list(dict.fromkeys(doc for _, doc in sorted(docs))) for key, docs in found.items()}


def _documents(release: Path, wanted: set[str]) -> dict[str, dict[str, Any]]:
    """The cited documents, and the knowledge-base rows of ``wanted`` other documents."""
    columns = ["doc_id", "modality", "text", "title"]
    docs = {d["doc_id"]: d for d in pl.read_parquet(_shards(release, "documents"), columns=columns).to_dicts()}
    rest = wanted - set(docs)
    if rest:
        kb = pl.read_parquet(_shards(release, "knowledge_base"), columns=columns)
        docs.update({d["doc_id"]: d for d in kb.filter(pl.col("doc_id").is_in(sorted(rest))).to_dicts()})
    return docs


def release_items(release: Path | str) -> list[dict[str, Any]]:
    """Every sentence of the release with a cited document or a document the entailment judge
    decided on, as a labelling item (``rejected_ids``: every judged document it does not cite,
    best-ranked first)."""
    release = Path(release)
    qa = pl.read_parquet(_shards(release, "qa"), columns=["sample_id", "question", "answer", "sentences"])
    judged = _judged(release)
    by_id = _documents(release, {d for docs in judged.values() for d in docs})
    items = []
    for row in qa.to_dicts():
        for s in row["sentences"] or []:
            cited = [*(s["text_citations"] or []), *(s["image_citations"] or [])]
            others = [d for d in judged.get((row["sample_id"], int(s["index"])), []) if d in by_id and d not in cited]
            if not (cited or others):
                continue
            missing = [d for d in cited if d not in by_id]
            if missing:
                raise MmcurateError(f"{release}: cited document {missing[0]!r} is not in the documents table")
            items.append(
                {
                    "item_id": item_id(row["sample_id"], s["index"]),
                    "sample_id": row["sample_id"],
                    "sentence_index": int(s["index"]),
                    "question": row["question"],
                    "answer": row["answer"],
                    "sentence": s["text"],
                    "document_ids": cited,
                    "documents": DOC_SEP.join(_render(by_id[d]) for d in cited),
                    "rejected_ids": others,
                    "modality": {d: by_id[d]["modality"] for d in [*cited, *others]},
                    "rendered": {d: _render(by_id[d]) for d in others},
                }
            )
    return items


def _render(doc: dict[str, Any]) -> str:
    if doc["modality"] == "image":
        return f"[{doc['doc_id']}] image (sha256 {doc['doc_id'].removeprefix('image:')})"
    title = f"{doc['title']}: " if doc.get("title") else ""
    return f"[{doc['doc_id']}] {title}{doc['text']}"


@dataclass(frozen=True)
class ExportResult:
    items: int
    available: int
    jsonl: Path
    csv: Path
    sampling: str  # how the batch was drawn (the estimate it supports)


def sampling_note(rejected: int | None) -> str:
    if rejected is None:
        return (
            "sentences drawn uniformly, uncited ones included, each with every document the judge decided on: "
            "every labelled pair has weight 1"
        )
    return (
        f"sentences drawn uniformly, uncited ones included, each with its cited documents and at most {rejected} "
        "of its uncited judged documents drawn uniformly: the import weights those by the inverse of their "
        "inclusion probability"
    )


def export_batch(
    release: Path | str, n: int, out: Path | str, seed: int = 0, rejected: int | None = None, force: bool = False
) -> ExportResult:
    """Sample ``n`` items (all if fewer exist), seeded, into ``out/batch.{jsonl,csv}``; each shows
    its cited documents and every uncited judged one, or at most ``rejected`` of those drawn at
    random (see the module docstring). Refused over a batch people already labelled, unless
    ``force``."""
    if n < 1:
        raise MmcurateError(f"--n must be at least 1, got {n}")
    if rejected is not None and rejected < 0:
        raise MmcurateError(f"--rejected must be at least 0, got {rejected}")
    items = sorted(release_items(release), key=lambda i: i["item_id"])
    if not items:
        raise MmcurateError(f"{release}: no sentence has a cited or judged document; nothing to verify")
    chosen = random.Random(seed).sample(items, min(n, len(items)))
    prepare_batch_folder(Path(release), Path(out), (*QUESTIONS, "document_support", "annotator"), force)
    rows = []
    for item in chosen:
        others = item["rejected_ids"]
        if rejected is not None and len(others) > rejected:
            drawn = set(random.Random(f"{seed}:{item['item_id']}").sample(others, rejected))
            others = [d for d in others if d in drawn]
        rows.append(
            {
                **item,
                "rejected_ids": others,
                "rejected_documents": DOC_SEP.join(item["rendered"][d] for d in others),
                **{q: "" for q in QUESTIONS},
                "document_support": "",
                "annotator": "",
            }
        )
    jsonl, csv_path = write_batch(rows, COLUMNS, Path(out))
    return ExportResult(len(rows), len(items), jsonl, csv_path, sampling_note(rejected))


# ---------------------------------------------------------------------------- import
@dataclass(frozen=True)
class Labelled:
    """One annotator's labels of one item: the three questions, and per shown document
    (``documents``: doc id -> yes/no; empty when the annotator left it out)."""

    answers: dict[str, str]
    documents: dict[str, str]


def read_labels(
    path: Path | str, known: Mapping[str, dict[str, Any]] | set[str] | None = None
) -> tuple[str, dict[str, dict[str, str]]]:
    """(annotator, {item_id: {question: yes/no}}) of one labelled file; raise on any bad row."""
    name, labelled = read_labelled(path, known)
    return name, {item: label.answers for item, label in labelled.items()}


def read_labelled(
    path: Path | str, known: Mapping[str, dict[str, Any]] | set[str] | None = None
) -> tuple[str, dict[str, Labelled]]:
    """(annotator, {item_id: Labelled}) of one labelled file; raise on any bad row. ``known``:
    the release's items (checks item ids, and the rejected documents shown)."""
    path = Path(path)
    labels: dict[str, Labelled] = {}
    names: set[str] = set()
    for line, record in read_records(path, ("item_id", *QUESTIONS)):
        where = f"{path}:{line}"
        item = str(record.get("item_id") or "").strip()
        if not item:
            raise MmcurateError(f"{where}: missing item_id")
        if known is not None and item not in known:
            raise MmcurateError(f"{where}: item_id {item!r} is not a cited sentence of this release")
        raw = {q: record.get(q) for q in QUESTIONS}
        values = {q: "" if v is None else str(v).strip().lower() for q, v in raw.items()}
        if all(v == "" for v in values.values()):
            continue  # not labelled by this annotator
        for q, v in values.items():
            if v not in LABELS:
                shown = "empty" if v == "" else repr(raw[q])
                raise MmcurateError(f"{where}: {q} is {shown}; expected yes or no")
        if item in labels:
            raise MmcurateError(f"{where}: item_id {item!r} labelled twice")
        annotator = str(record.get("annotator") or "").strip()
        if annotator:
            names.add(annotator)
        labels[item] = Labelled(values, _document_labels(record, where, item, known))
    if len(names) > 1:
        raise MmcurateError(f"{path}: one file per annotator, found annotators {sorted(names)}")
    return (names.pop() if names else path.stem), labels


def _document_labels(
    record: Mapping[str, Any], where: str, item: str, known: Mapping[str, dict[str, Any]] | set[str] | None
) -> dict[str, str]:
    """doc id -> yes/no from ``document_support`` (empty: not labelled per document)."""
    support = [v.lower() for v in cell_list(record.get("document_support"))]
    if not support:
        return {}
    shown = [*cell_list(record.get("document_ids")), *cell_list(record.get("rejected_ids"))]
    if len(support) != len(shown):
        raise MmcurateError(
            f"{where}: document_support has {counted(len(support), 'label')} for "
            f"{counted(len(shown), 'shown document')}"
        )
    bad = [v for v in support if v not in LABELS]
    if bad:
        raise MmcurateError(f"{where}: document_support holds {bad[0]!r}; expected yes or no per document")
    if isinstance(known, Mapping):
        expected = known[item]
        if cell_list(record.get("document_ids")) != expected["document_ids"]:
            raise MmcurateError(f"{where}: document_ids differ from the release's citations of {item}")
        stray = [d for d in cell_list(record.get("rejected_ids")) if d not in expected["rejected_ids"]]
        if stray:
            raise MmcurateError(f"{where}: {stray[0]!r} was not rejected for {item} in the release's ledger")
    return dict(zip(shown, support))


@dataclass(frozen=True)
class ImportResult:
    annotators: list[str]
    items: int
    verified: int
    agreement: dict[str, dict[str, Any]]  # question -> agreement_summary
    path: Path
    agreement_path: Path
    table3: list[dict[str, Any]]  # the paper's Table 3 criteria, from the human labels
    entailment: list[dict[str, Any]]  # the entailment judge against human support labels, per modality


def _majority(votes: list[str]) -> str | None:
    """yes / no when a strict majority says it, else None (a tie)."""
    yes = votes.count("yes")
    return "yes" if yes > len(votes) / 2 else "no" if len(votes) - yes > len(votes) / 2 else None


def _share(values: list[str]) -> float | None:
    return round(values.count("yes") / len(values), 4) if values else None


def _weights(item: Mapping[str, Any], shown: set[str]) -> dict[str, float]:
    """Per shown document, the inverse of its inclusion probability given its sentence was drawn:
    1 for a cited document, R / K' for one of the K' uncited documents shown of the R judged."""
    uncited = [d for d in shown if d not in item["document_ids"]]
    weight = len(item["rejected_ids"]) / len(uncited) if uncited else 1.0
    return {d: 1.0 if d in item["document_ids"] else weight for d in shown}


def human_support(
    items: Mapping[str, dict[str, Any]], per_annotator: Mapping[str, Mapping[str, Labelled]], judges: Mapping[str, str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(Table 3 rows, entailment rows) from the majority labels (see the module docstring)."""
    labelled = sorted({i for labels in per_annotator.values() for i in labels})
    needs, grounded = [], []
    pairs: list[tuple[str, bool, str, float]] = []  # (modality, cited by the judge, human label, weight)
    for item in labelled:
        votes = [labels[item] for labels in per_annotator.values() if item in labels]
        cited = set(items[item]["document_ids"])
        label = _majority([v.answers["needs_verification"] for v in votes])
        if label is not None:
            needs.append(label)
        label = _majority([v.answers["sentence_grounded"] for v in votes])
        if label is not None and cited:  # grounded in its cited documents: only a cited sentence can be
            grounded.append(label)
        shown = list(dict.fromkeys(d for v in votes for d in v.documents))
        weights = _weights(items[item], set(shown))
        for doc in shown:
            label = _majority([v.documents[doc] for v in votes if doc in v.documents])
            if label is not None:
                pairs.append((items[item]["modality"][doc], doc in cited, label, weights[doc]))
    table3 = [
        {"criterion": "statements requiring verification", "share": _share(needs), "n": len(needs)},
        *(
            {
                "criterion": f"{modality} documents supporting statements",
                "share": _share([h for m, c, h, _ in pairs if m == modality and c]),
                "n": sum(1 for m, c, _, _ in pairs if m == modality and c),
            }
            for modality in ("image", "text")
        ),
        {"criterion": "supported statements", "share": _share(grounded), "n": len(grounded)},
    ]
    entailment = []
    for modality in ("text", "image", "all"):
        mine = [(c, h, w) for m, c, h, w in pairs if modality in (m, "all")]
        tp = sum(w for c, h, w in mine if c and h == "yes")
        fp = sum(w for c, h, w in mine if c and h == "no")
        fn = sum(w for c, h, w in mine if not c and h == "yes")
        tn = sum(w for c, h, w in mine if not c and h == "no")
        precision = tp / (tp + fp) if tp + fp else None
        recall = tp / (tp + fn) if tp + fn else None
        f1 = (
            2 * precision * recall / (precision + recall)
            if precision is not None and recall is not None and precision + recall
            else None
        )
        entailment.append(
            {
                "modality": modality,
                "judge": judges.get(modality, "+".join(sorted(set(judges.values())))),
                "pairs": len(mine),
                "weighted": any(w != 1.0 for _, _, w in mine),
                **{name: round(value, 6) for name, value in (("tp", tp), ("fp", fp), ("fn", fn), ("tn", tn))},
                "precision": precision,
                "recall": recall,
                "f1": f1,
            }
        )
    return table3, entailment


def _judges(release: Path) -> dict[str, str]:
    """The entailment judges the release names: text and image."""
    judge = load_manifest(release).judge if (release / MANIFEST).is_file() else None
    return {"text": (judge and judge.name) or "unknown", "image": (judge and judge.image) or "none"}


def import_labels(
    release: Path | str, files: Sequence[Path | str], out: Path | str, force: bool = False
) -> ImportResult:
    """Validate labelled files, write ``out/human_verified.parquet`` and ``out/agreement.json``
    (refused over an earlier import's unless ``force``)."""
    release, out = labels_import(release, files, out, RESULTS, force)
    items = {i["item_id"]: i for i in release_items(release)}
    per_annotator: dict[str, dict[str, Labelled]] = {}
    for file in files:
        name, labels = read_labelled(file, items)
        if name in per_annotator:
            raise MmcurateError(f"{file}: annotator {name!r} already given by another file")
        per_annotator[name] = labels
    answers = {a: {i: v.answers for i, v in labels.items()} for a, labels in per_annotator.items()}
    labelled = sorted({i for labels in per_annotator.values() for i in labels})
    if not labelled:
        raise MmcurateError("no labelled item in the given files")
    rows = []
    for item in labelled:
        votes = [labels[item] for labels in answers.values() if item in labels]
        yes = {q: sum(v[q] == "yes" for v in votes) for q in QUESTIONS}
        majority = len(votes) / 2
        verified = (
            bool(items[item]["document_ids"])
            and yes["documents_support"] > majority
            and yes["sentence_grounded"] > majority
        )
        rows.append(
            {
                "item_id": item,
                "sample_id": items[item]["sample_id"],
                "sentence_index": items[item]["sentence_index"],
                "annotators": len(votes),
                **{f"{q}_yes": yes[q] for q in QUESTIONS},
                "human_verified": verified,
            }
        )
    agreement = {
        q: agreement_summary({a: {i: v[q] for i, v in labels.items()} for a, labels in answers.items()})
        for q in QUESTIONS
    }
    table3, entailment = human_support(items, per_annotator, _judges(release))
    out.mkdir(parents=True, exist_ok=True)
    path = write_table(pa.Table.from_pylist(rows, schema=HUMAN_VERIFIED), out / RESULTS[0])
    report = {
        "release": str(release),
        "annotators": sorted(per_annotator),
        "items": len(rows),
        "human_verified": sum(r["human_verified"] for r in rows),
        "rule": "a cited sentence whose strict majority says documents_support=yes and sentence_grounded=yes",
        "sampling": SAMPLING,
        "agreement": agreement,
        "labels": {q: dict(Counter(v[q] for ls in answers.values() for v in ls.values())) for q in QUESTIONS},
        "table3": table3,
        "entailment": entailment,
    }
    agreement_path = out / RESULTS[1]
    agreement_path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return ImportResult(
        sorted(per_annotator), len(rows), report["human_verified"], agreement, path, agreement_path, table3, entailment
    )
