"""How many samples a plan is for, and some real rows to build its requests from.

The count comes from, in order: ``--samples``; the ingest a flow already made of each
source in the workdir (its sample count); the source's raw records, counted without
building samples (``SourceAdapter.count_records``, an upper bound). A source's ``limit``
caps its count, as in the flow. A source with none of these (Reddit's dumps: a record is a
post or a comment, not a sample) is named as uncounted, never the end of the plan: the plan
covers the counted sources and says which are left out. Rows for the token estimate are the first
``SAMPLE_ROWS`` ingested samples of each source; with no ingest at all there are none, and
the benchmark's planner builds its requests from rows shaped like the paper's samples.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from mmcurate.core.config import Settings, SourceSpec
from mmcurate.core.errors import SourceError
from mmcurate.core.images import ImageStore
from mmcurate.sources import adapter_class
from mmcurate.sources.ingest import ingest_folder, load_ingest

SAMPLE_ROWS = 100  # rows per source the token estimate builds requests from
UNCOUNTED = "no cheap record count and no ingest in the workdir: run its ingest or pass --samples N"


@dataclass(frozen=True)
class PlanInput:
    samples: int
    rows: list[dict[str, Any]]  # canonical sample rows from the ingests (empty without one)
    how: str  # where the count and the rows come from
    uncounted: list[str] = field(default_factory=list)  # sources with no count: left out of ``samples``


def _first_rows(path: Path, limit: int) -> list[dict[str, Any]]:
    handle = pq.ParquetFile(path)
    rows: list[dict[str, Any]] = []
    for batch in handle.iter_batches(batch_size=limit):
        rows += batch.to_pylist()
        if len(rows) >= limit:
            break
    return rows[:limit]


def _raw_count(spec: SourceSpec) -> int | None:
    """The source's raw record count, or None when its layout has no cheap count."""
    with tempfile.TemporaryDirectory() as scratch:  # adapters want a store; counting writes nothing to it
        try:
            adapter = adapter_class(spec.name)(spec.root, ImageStore(scratch), images=spec.images, options=spec.options)
        except SourceError as exc:
            raise SourceError(f"{exc}; pass --samples N to plan without counting") from None
        return adapter.count_records()


def plan_input(settings: Settings, sources: list[SourceSpec], samples: int | None) -> PlanInput:
    """The sample count and request rows of a plan (see the module docstring)."""
    counts: list[int] = []
    rows: list[dict[str, Any]] = []
    how: list[str] = []
    uncounted: list[str] = []
    count: int | None
    for spec in sources:
        done = (
            load_ingest(ingest_folder(settings.workdir, spec.name, spec.root, spec.options))
            if spec.root.is_dir()
            else None
        )
        if done is not None:
            count, found = done.samples, "ingest"
            rows += _first_rows(done.samples_path, min(SAMPLE_ROWS, spec.limit or SAMPLE_ROWS))
        elif samples is None:
            count, found = _raw_count(spec), "raw records"
            if count is None:
                uncounted.append(spec.name)
                how.append(f"{spec.name} unknown ({UNCOUNTED})")
                continue
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
    return PlanInput(samples=total, rows=rows, how=what, uncounted=uncounted)
