"""How many samples a plan is for, and some real rows to build its requests from.

The count comes from, in order: ``--samples``; the ingest a flow already made of each
source in the workdir (its sample count); the source's raw records, counted without
building samples (``SourceAdapter.count_records``, an upper bound). A source's ``limit``
caps its count, as in the flow. Rows for the token estimate are the first
``SAMPLE_ROWS`` ingested samples of each source; with no ingest at all there are none, and
the benchmark's planner builds its requests from rows shaped like the paper's samples.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from mmcurate.core.config import Settings, SourceSpec
from mmcurate.core.errors import MmcurateError, SourceError
from mmcurate.core.images import ImageStore
from mmcurate.sources import adapter_class
from mmcurate.sources.ingest import ingest_folder, load_ingest

SAMPLE_ROWS = 100  # rows per source the token estimate builds requests from


@dataclass(frozen=True)
class PlanInput:
    samples: int
    rows: list[dict[str, Any]]  # canonical sample rows from the ingests (empty without one)
    how: str  # where the count and the rows come from


def _first_rows(path: Path, limit: int) -> list[dict[str, Any]]:
    handle = pq.ParquetFile(path)
    rows: list[dict[str, Any]] = []
    for batch in handle.iter_batches(batch_size=limit):
        rows += batch.to_pylist()
        if len(rows) >= limit:
            break
    return rows[:limit]


def _raw_count(spec: SourceSpec) -> int:
    with tempfile.TemporaryDirectory() as scratch:  # adapters want a store; counting writes nothing to it
        try:
            adapter = adapter_class(spec.name)(spec.root, ImageStore(scratch), images=spec.images,
                                               options=spec.options)
        except SourceError as exc:
            raise SourceError(f"{exc}; pass --samples N to plan without counting") from None
        count = adapter.count_records()
    if count is None:
        raise MmcurateError(f"source {spec.name} has no cheap record count and no ingest in the workdir; "
                            "run the flow's ingest first or pass --samples N")
    return count


def plan_input(settings: Settings, sources: list[SourceSpec], samples: int | None) -> PlanInput:
    """The sample count and request rows of a plan (see the module docstring)."""
    counts: list[int] = []
    rows: list[dict[str, Any]] = []
    how: list[str] = []
    for spec in sources:
        done = load_ingest(ingest_folder(settings.workdir, spec.name, spec.root, spec.options)) \
            if spec.root.is_dir() else None
        if done is not None:
            count, found = done.samples, "ingest"
            rows += _first_rows(done.samples_path, min(SAMPLE_ROWS, spec.limit or SAMPLE_ROWS))
        elif samples is None:
            count, found = _raw_count(spec), "raw records"
        else:
            continue
        counts.append(count if spec.limit is None else min(count, spec.limit))
        how.append(f"{spec.name} {counts[-1]:,} ({found})")
    if samples is not None:
        total, what = samples, "--samples"
    else:
        total, what = sum(counts), "; ".join(how)
    if rows and samples is not None:
        what += f"; requests built from the ingested samples of {', '.join(h.split()[0] for h in how)}"
    return PlanInput(samples=total, rows=rows, how=what)
