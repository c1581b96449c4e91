"""Reading a release back into canonical rows for evaluation: DeflectionBench samples,
RefLVQA QA pairs and knowledge-base documents.

Shards embed images as ``{bytes, path}`` structs; evaluation and re-curation work on
sha256 references into an image store, so the bytes go back into a store.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from mmcurate.core.images import ImageStore
from mmcurate.core.schema import SAMPLE
from mmcurate.releases.reader import Release


def _sha(image: dict[str, Any] | None, store: ImageStore) -> str | None:
    if image is None:
        return None
    return store.put(image["bytes"])


def canonical_samples(release: Release, store: ImageStore, config: str = "test") -> pa.Table:
    """The release's rows in the canonical SAMPLE schema, images back in ``store``."""
    rows = []
    for row in release.table(config).to_pylist():
        out = {name: row[name] for name in SAMPLE.names}
        out["images"] = [_sha(image, store) for image in row["images"] or []]
        for field in ("gold_contexts", "negative_contexts"):
            out[field] = [{**c, "image": _sha(c["image"], store)} for c in row[field] or []]
        rows.append(out)
    return pa.Table.from_pylist(rows, schema=SAMPLE)


def canonical_rows(release: Release, store: ImageStore, config: str) -> list[dict[str, Any]]:
    """One config's rows with top-level ``image`` / ``images`` back as sha256 in ``store``
    (RefLVQA's ``qa`` and ``knowledge_base``)."""
    rows = release.table(config).to_pylist()
    for row in rows:
        if "image" in row:
            row["image"] = _sha(row["image"], store)
        if "images" in row:
            row["images"] = [_sha(image, store) for image in row["images"] or []]
    return rows
