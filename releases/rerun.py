"""Recognising a rerun: a draft whose content equals an existing release publishes nothing."""
from __future__ import annotations

import pyarrow as pa

from mmcurate.releases.draft import ReleaseDraft
from mmcurate.releases.reader import Release


def _ids(value: object) -> object:
    """Context lists compared by id; embedded image structs compared by path (sha-named)."""
    if isinstance(value, list):
        return [_ids(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"bytes", "path"}:
            return str(value["path"]).split(".")[0]
        return value.get("context_id") or {k: _ids(v) for k, v in value.items()}
    return value


def _signature(table: pa.Table) -> list[dict]:
    rows = [{k: _ids(v) for k, v in row.items()} for row in table.to_pylist()]
    return sorted(rows, key=lambda r: str(r.get("sample_id") or r.get("doc_id")))


def same_content(existing: Release, draft: ReleaseDraft) -> bool:
    """True when every config of ``draft`` holds the same rows as ``existing``."""
    if sorted(existing.configs) != sorted(draft.tables):
        return False
    for name, table in draft.tables.items():
        old = existing.table(name)
        if old.num_rows != table.num_rows or _signature(old) != _signature(table):
            return False
    return True
