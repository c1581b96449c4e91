"""The decision ledger: filters never delete, they append one row per decision.

A release is a view over samples + ledger, so any sample's fate can be traced
(``mmcurate why``). Verdicts are short words (``keep``, ``drop``, a judge grade, ...);
``detail`` is a JSON object with whatever explains the verdict.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .schema import LEDGER

BATCH_ROWS = 65_536


@dataclass(frozen=True)
class Decision:
    sample_id: str
    stage: str
    check: str
    verdict: str
    model: str | None = None
    context_id: str | None = None
    detail: dict[str, Any] | None = None

    def to_row(self, run_id: str) -> dict[str, Any]:
        return {
            "sample_id": self.sample_id,
            "stage": self.stage,
            "check": self.check,
            "model": self.model,
            "context_id": self.context_id,
            "verdict": self.verdict,
            "detail": json.dumps(self.detail or {}, ensure_ascii=False, sort_keys=True),
            "run_id": run_id,
        }


def ledger_table(decisions: list[Decision], run_id: str) -> pa.Table:
    return pa.Table.from_pylist([d.to_row(run_id) for d in decisions], schema=LEDGER)


class Ledger:
    """A run's decisions as an ordered list of sources: Parquet parts on disk (what shards
    spill) and tables in memory (a parent release's history, a small stage's rows).

    It is read one record batch at a time: the release writer streams it into one Parquet
    file and the statistics fold over its batches, so no step holds every decision of a
    large run at once. ``table()`` concatenates it, for small ledgers and tests.
    """

    def __init__(self, sources: Iterable[Path | pa.Table] = ()) -> None:
        self.sources: list[Path | pa.Table] = list(sources)

    def __add__(self, other: Ledger) -> Ledger:
        return Ledger([*self.sources, *other.sources])

    @property
    def num_rows(self) -> int:
        return sum(s.num_rows if isinstance(s, pa.Table) else pq.ParquetFile(s).metadata.num_rows for s in self.sources)

    def batches(self, columns: list[str] | None = None, batch_size: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
        """Every row, in order, as LEDGER batches (only ``columns``, when given)."""
        schema = pa.schema([LEDGER.field(c) for c in columns]) if columns else LEDGER
        for source in self.sources:
            if isinstance(source, pa.Table):
                yield from source.select(schema.names).cast(schema).to_batches(max_chunksize=batch_size)
            else:
                for batch in pq.ParquetFile(source).iter_batches(batch_size=batch_size, columns=schema.names):
                    yield batch.cast(schema)

    def table(self) -> pa.Table:
        return pa.Table.from_batches(list(self.batches()), schema=LEDGER)

    def write(self, path: Path) -> Path:
        """Stream every row into one Parquet file at ``path`` (atomically: complete or absent)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        with pq.ParquetWriter(partial, LEDGER, compression="zstd") as writer:
            for batch in self.batches():
                writer.write_batch(batch)
        os.replace(partial, path)
        return path
