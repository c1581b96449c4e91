"""The canonical Arrow schemas, defined once for every source and stage.

A sample is what an adapter produces; the ledger records every decision made about it;
the quarantine records every raw record that could not become a sample.
"""
from __future__ import annotations

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

MODALITIES = ("text", "image")
