"""The canonical Arrow schemas, defined once for every source and stage.

A sample is what an adapter produces; the ledger records every decision made about it;
the quarantine records every raw record that could not become a sample; a document is
what retrieval searches and citations point to.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

CONTEXT = pa.struct(
    [
        pa.field("context_id", pa.string(), nullable=False),
        pa.field("modality", pa.string(), nullable=False),  # "text" | "image"
        pa.field("text", pa.string()),
        pa.field("image", pa.string()),  # sha256 of the image bytes in the image store
        pa.field("title", pa.string()),
    ]
)

SAMPLE = pa.schema(
    [
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("source_id", pa.string(), nullable=False),
        pa.field("question", pa.string(), nullable=False),
        pa.field("answers", pa.list_(pa.string()), nullable=False),
        pa.field("images", pa.list_(pa.string()), nullable=False),
        pa.field("gold_contexts", pa.list_(CONTEXT), nullable=False),
        pa.field("negative_contexts", pa.list_(CONTEXT), nullable=False),
        pa.field("meta", pa.string(), nullable=False),  # JSON object
    ]
)

QUARANTINE = pa.schema(
    [
        pa.field("source", pa.string(), nullable=False),
        pa.field("locator", pa.string(), nullable=False),  # "RS_2023-01.zst:17"
        pa.field("reason", pa.string(), nullable=False),
        pa.field("raw", pa.string()),  # the offending record, truncated
    ]
)

LEDGER = pa.schema(
    [
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("stage", pa.string(), nullable=False),
        pa.field("check", pa.string(), nullable=False),
        pa.field("model", pa.string()),
        pa.field("context_id", pa.string()),
        pa.field("verdict", pa.string(), nullable=False),
        pa.field("detail", pa.string()),  # JSON object
        pa.field("run_id", pa.string(), nullable=False),
    ]
)

# A retrievable document: a knowledge-base passage or article, or an image. Knowledge bases
# (retrieval.kb) and RefLVQA's cited documents share this shape.
DOCUMENT = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("modality", pa.string(), nullable=False),  # "text" | "image"
        pa.field("text", pa.string()),
        pa.field("image", pa.string()),  # sha256 in the image store
        pa.field("title", pa.string()),
        pa.field("provenance", pa.string(), nullable=False),  # JSON: {"corpus": spec, "id": original id}
    ]
)

# One sentence of a long-form answer (RefLVQA): whether it can be fact-checked (null while
# undecided) and the documents cited for it; ``flagged`` = fact-checkable but unsupported.
SENTENCE = pa.struct(
    [
        pa.field("index", pa.int32(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("fact_checkable", pa.bool_()),
        pa.field("text_citations", pa.list_(pa.string()), nullable=False),
        pa.field("image_citations", pa.list_(pa.string()), nullable=False),
        pa.field("flagged", pa.bool_(), nullable=False),
    ]
)

MODALITIES = ("text", "image")


def with_meta(samples: pa.Table) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each row of a ``SAMPLE`` table with its ``meta`` JSON decoded."""
    for row in samples.to_pylist():
        yield row, json.loads(row["meta"])
