"""The decision trace of one sample, read from a release's ledger."""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow.compute as pc

from .errors import ReleaseError
from .reader import Release

TRACE_COLUMNS = ("stage", "check", "model", "context_id", "verdict", "detail", "run_id")


@dataclass
class Trace:
    sample_id: str
    in_release: bool
    decisions: list[dict]  # ledger rows in the order they were recorded


def trace_sample(release: Release, sample_id: str) -> Trace:
    ledger = release.ledger
    rows = ledger.filter(pc.equal(ledger.column("sample_id"), sample_id)).select(list(TRACE_COLUMNS)).to_pylist()
    in_release = sample_id in set(release.sample_ids)
    if not rows and not in_release:
        raise ReleaseError(f"unknown sample id {sample_id!r}: not in {release.benchmark} {release.version} or its ledger")
    return Trace(sample_id=sample_id, in_release=in_release, decisions=rows)
