"""Per-row quality columns computed from release tables, ready for Great Expectations.

GE expectations work on columns, so every rule about nested data (contexts, citations,
embedded images) is first reduced to one scalar per row here: ``n_negatives``,
``gold_in_negatives``, ``n_duplicate_contexts``, ``images_decode``, ...
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from mmcurate.core.errors import ImageRejected
from mmcurate.core.images import check_image

DEFLECTION_COLUMNS = [
    "sample_id",
    "source",
    "source_id",
    "question",
    "answers",
    "images",
    "gold_contexts",
    "negative_contexts",
    "meta",
    "shuffle_seed",
]
QA_COLUMNS = ["sample_id", "source_id", "question", "images", "answer", "sentences", "meta"]
DOCUMENT_COLUMNS = ["doc_id", "modality", "text", "image", "title", "provenance"]
KB_COLUMNS = ["doc_id", "modality", "text", "image", "title"]
DEFLECTION_DERIVED = [
    "question_chars",
    "n_answers",
    "n_negatives",
    "gold_in_negatives",
    "n_duplicate_contexts",
    "images_decode",
]
QA_DERIVED = ["question_chars", "answer_chars", "n_missing_cited_docs", "n_unsupported_sentences", "images_decode"]
DOCUMENT_DERIVED = ["images_decode"]


def image_decodes(image: dict | None) -> bool:
    """An embedded image struct decodes fully with Pillow (a null image is not an image)."""
    if image is None:
        return True
    data = image.get("bytes")
    if not data:
        return False
    try:
        check_image(data)
    except ImageRejected:
        return False
    return True


def _all_decode(images: Iterable[dict | None]) -> bool:
    return all(image_decodes(i) for i in images)


def _content_key(ctx: dict) -> tuple:
    image = ctx.get("image")
    digest = hashlib.sha256(image["bytes"]).hexdigest() if image and image.get("bytes") else None
    text = " ".join((ctx.get("text") or "").split()).lower() or None
    return (ctx.get("modality"), text, digest)


def _duplicates(contexts: list[dict]) -> int:
    """Contexts in one list that repeat an earlier one by id or by identical content."""
    seen_ids: set[str] = set()
    seen_content: set[tuple] = set()
    count = 0
    for ctx in contexts:
        key = _content_key(ctx)
        if ctx["context_id"] in seen_ids or key in seen_content:
            count += 1
        seen_ids.add(ctx["context_id"])
        seen_content.add(key)
    return count


def _gold_in_negatives(gold: list[dict], negatives: list[dict]) -> bool:
    gold_ids = {c["context_id"] for c in gold}
    gold_content = {_content_key(c) for c in gold}
    return any(c["context_id"] in gold_ids or _content_key(c) in gold_content for c in negatives)


def _chars(text: str | None) -> int:
    return len(text.strip()) if text else 0


def deflection_frame(batches: Iterable[pa.RecordBatch]) -> pd.DataFrame:
    """The ``test`` config with one derived column per rule, built a batch at a time: nested
    columns (answers, images, contexts) are reduced to their lengths, so the frame holds
    no image bytes; every column keeps its name for the exact-columns rule."""
    frames = [_deflection_batch(b) for b in batches]
    if not frames:
        return pd.DataFrame(columns=DEFLECTION_COLUMNS + DEFLECTION_DERIVED)
    return pd.concat(frames, ignore_index=True)


def _deflection_batch(batch: pa.RecordBatch) -> pd.DataFrame:
    lists = [f.name for f in batch.schema if pa.types.is_list(f.type)]
    frame = batch.drop_columns(lists).to_pandas()
    for name in lists:
        frame[name] = pc.list_value_length(batch.column(name)).to_numpy(zero_copy_only=False)
    frame = frame[batch.schema.names]
    rows = batch.to_pylist()
    frame["question_chars"] = [_chars(r.get("question")) for r in rows]
    frame["n_answers"] = [sum(1 for a in r.get("answers") or [] if _chars(a)) for r in rows]
    frame["n_negatives"] = [len(r.get("negative_contexts") or []) for r in rows]
    frame["gold_in_negatives"] = [
        _gold_in_negatives(r.get("gold_contexts") or [], r.get("negative_contexts") or []) for r in rows
    ]
    frame["n_duplicate_contexts"] = [
        _duplicates(r.get("gold_contexts") or []) + _duplicates(r.get("negative_contexts") or []) for r in rows
    ]
    frame["images_decode"] = [
        _all_decode(
            list(r.get("images") or [])
            + [c.get("image") for c in (r.get("gold_contexts") or []) + (r.get("negative_contexts") or [])]
        )
        for r in rows
    ]
    return frame


def source_mix_frame(sources: list[str], bounds: dict[str, tuple[float, float]]) -> pd.DataFrame:
    """One row per source (configured or observed): its share and its allowed range."""
    counts = Counter(sources)
    total = max(len(sources), 1)
    names = sorted(set(bounds) | set(counts))
    rows = []
    for name in names:
        low, high = bounds.get(name, (0.0, 0.0))  # an unconfigured source may not appear
        fraction = counts.get(name, 0) / total
        rows.append(
            {
                "source": name,
                "fraction": fraction,
                "min_frac": float(low),
                "max_frac": float(high),
                "in_bounds": bool(low - 1e-9 <= fraction <= high + 1e-9),
            }
        )
    return pd.DataFrame(rows, columns=["source", "fraction", "min_frac", "max_frac", "in_bounds"])


def qa_frame(qa: pa.Table, documents: pa.Table) -> pd.DataFrame:
    doc_ids = set(documents.column("doc_id").to_pylist())
    frame = qa.to_pandas()
    rows = qa.to_pylist()
    missing, unsupported = [], []
    for r in rows:
        sentences = r.get("sentences") or []
        cited = [d for s in sentences for d in (s.get("text_citations") or []) + (s.get("image_citations") or [])]
        missing.append(sum(1 for d in cited if d not in doc_ids))
        unsupported.append(
            sum(
                1
                for s in sentences
                if s.get("fact_checkable")
                and not (s.get("text_citations") or s.get("image_citations"))
                and not s.get("flagged")
            )
        )
    frame["question_chars"] = [_chars(r.get("question")) for r in rows]
    frame["answer_chars"] = [_chars(r.get("answer")) for r in rows]
    frame["n_missing_cited_docs"] = missing
    frame["n_unsupported_sentences"] = unsupported
    frame["images_decode"] = [_all_decode(r.get("images") or []) for r in rows]
    return frame


def documents_frame(table: pa.Table) -> pd.DataFrame:
    frame = table.to_pandas()
    frame["images_decode"] = [image_decodes(i) for i in table.column("image").to_pylist()]
    return frame
