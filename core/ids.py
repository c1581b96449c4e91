"""Stable identifiers: the same source record gets the same id in every run and version."""

from __future__ import annotations

import datetime
import hashlib
import os
import secrets

ID_HEX = 20  # 80 bits: collision-free in practice for hundreds of millions of records


def stable_id(*parts: str) -> str:
    """Hash of the parts joined by a separator that cannot occur in ordinary text."""
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:ID_HEX]


def sample_id(source: str, source_id: str) -> str:
    return stable_id(source, source_id)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def new_run_id() -> str:
    """A sortable, unique id for one pipeline run: UTC time plus random suffix."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{now}-{secrets.token_hex(3)}"
