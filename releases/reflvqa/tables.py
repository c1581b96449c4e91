"""The RefLVQA release tables, assembled from the citation stage's output.

- ``qa``: one row per (question, answer) pair, with every answer sentence, whether it is
  fact-checkable, the documents cited for it and whether it is flagged (fact-checkable
  but unsupported);
- ``documents``: the documents cited at least once, with provenance (corpus spec and the
  document's id in that corpus);
- ``knowledge_base``: the whole retrieval corpus (text and image documents), so users can
  run their own retrieval-augmented systems over what the citations were drawn from.

``reflvqa_statistics`` gives the numbers of the paper's Table 1 row.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from mmcurate.core.errors import MmcurateError
from mmcurate.core.plural import counted
from mmcurate.core.schema import DOCUMENT, SENTENCE

QA = pa.schema(
    [
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("source_id", pa.string(), nullable=False),
        pa.field("question", pa.string(), nullable=False),
        pa.field("images", pa.list_(pa.string()), nullable=False),  # sha256 in the image store
        pa.field("answer", pa.string(), nullable=False),
        pa.field("sentences", pa.list_(SENTENCE), nullable=False),
        pa.field("meta", pa.string(), nullable=False),  # JSON object
    ]
)
DOCUMENTS = DOCUMENT  # doc_id, modality, text, image, title, provenance (JSON)
KNOWLEDGE_BASE = pa.schema([f for f in DOCUMENT if f.name != "provenance"])
TABLES = {"qa": QA, "documents": DOCUMENTS, "knowledge_base": KNOWLEDGE_BASE}


def reflvqa_tables(cited: pa.Table, knowledge_base: pa.Table) -> dict[str, pa.Table]:
    """``cited``: the citation stage's kept samples; ``knowledge_base``: the retrieval corpus
    (DOCUMENT rows, text and image documents)."""
    for name in ("sample_id", "source_id", "question", "images", "answers", "sentences", "meta"):
        if name not in cited.column_names:
            raise MmcurateError(f"reflvqa_tables needs the citation stage's output; column {name!r} is missing")
    rows = cited.select(["sample_id", "source_id", "question", "images", "answers", "sentences", "meta"]).to_pylist()
    qa_rows = [
        {
            "sample_id": r["sample_id"],
            "source_id": r["source_id"],
            "question": r["question"],
            "images": r["images"],
            "answer": r["answers"][0] if r["answers"] else "",
            "sentences": r["sentences"],
            "meta": r["meta"],
        }
        for r in rows
    ]
    qa = pa.Table.from_pylist(qa_rows, schema=QA)
    corpus = knowledge_base.cast(DOCUMENT)
    cited_ids = {doc for r in rows for s in r["sentences"] for doc in (*s["text_citations"], *s["image_citations"])}
    known = set(corpus["doc_id"].to_pylist())
    missing = sorted(cited_ids - known)
    if missing:
        raise MmcurateError(
            f"{counted(len(missing), 'cited document')} {'is' if len(missing) == 1 else 'are'} not in the "
            f"knowledge base, e.g. {missing[0]!r}"
        )
    mask = pa.array([d in cited_ids for d in corpus["doc_id"].to_pylist()], type=pa.bool_())
    documents = corpus.filter(mask)
    kb = corpus.select(KNOWLEDGE_BASE.names).cast(KNOWLEDGE_BASE)
    return {"qa": qa, "documents": documents, "knowledge_base": kb}


def reflvqa_statistics(tables: dict[str, pa.Table]) -> list[dict[str, Any]]:
    """Table 1 of the paper, one ``{"statistic", "value"}`` row each."""
    qa = tables["qa"].to_pylist()
    modality = dict(zip(tables["documents"]["doc_id"].to_pylist(), tables["documents"]["modality"].to_pylist()))
    n = len(qa)
    per_question = {"text": 0, "image": 0}
    sentences = fact_checkable = flagged = words = 0
    for row in qa:
        docs = {d for s in row["sentences"] for d in (*s["text_citations"], *s["image_citations"])}
        for doc in docs:
            per_question[modality[doc]] += 1
        words += len(row["answer"].split())
        sentences += len(row["sentences"])
        fact_checkable += sum(bool(s["fact_checkable"]) for s in row["sentences"])
        flagged += sum(bool(s["flagged"]) for s in row["sentences"])

    def mean(total: float, count: int) -> float:
        return round(total / count, 4) if count else 0.0

    return [
        {"statistic": "pairs", "value": n},
        {"statistic": "unique_questions", "value": len({r["question"] for r in qa})},
        {"statistic": "unique_images", "value": len({sha for r in qa for sha in r["images"]})},
        {"statistic": "text_documents_per_question", "value": mean(per_question["text"], n)},
        {"statistic": "image_documents_per_question", "value": mean(per_question["image"], n)},
        {"statistic": "answer_words_mean", "value": mean(words, n)},
        {"statistic": "sentences", "value": sentences},
        {"statistic": "fact_checkable_share", "value": mean(fact_checkable, sentences)},
        {"statistic": "flagged_sentences", "value": flagged},
        {"statistic": "documents_cited", "value": tables["documents"].num_rows},
        {"statistic": "knowledge_base_documents", "value": tables["knowledge_base"].num_rows},
    ]
