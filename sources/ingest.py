"""Run one adapter over a root and write samples, quarantine and images to a directory."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmcurate.core.images import ImageStore
from mmcurate.core.records import Rejected
from mmcurate.core.schema import QUARANTINE, SAMPLE
from mmcurate.core.tables import AtomicParquetWriter

from . import adapter_class

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class IngestResult:
    source: str
    out: Path
    samples: int
    quarantined: int
    source_files: list[str]

    @property
    def samples_path(self) -> Path:
        return self.out / "samples.parquet"

    @property
    def quarantine_path(self) -> Path:
        return self.out / "quarantine.parquet"

    @property
    def images_dir(self) -> Path:
        return self.out / "images"


def ingest(
    source: str,
    root: Path | str,
    out: Path | str,
    images: Path | str | None = None,
    options: dict[str, Any] | None = None,
    progress: Progress | None = None,
) -> IngestResult:
    """Ingest ``root`` with the ``source`` adapter into ``out``.

    ``samples.parquet`` and ``quarantine.parquet`` appear only when the run completes; a
    sample id seen twice is quarantined as a duplicate rather than written twice.
    """
    out = Path(out)
    store = ImageStore(out / "images")
    adapter = adapter_class(source)(root, store, images=images, options=options)
    seen: set[str] = set()
    kept = rejected = 0
    with (
        AtomicParquetWriter(out / "samples.parquet", SAMPLE) as samples,
        AtomicParquetWriter(out / "quarantine.parquet", QUARANTINE) as quarantine,
    ):
        for n, record in enumerate(adapter.records(), start=1):
            if isinstance(record, Rejected):
                quarantine.write(record.to_row(source))
                rejected += 1
            elif record.sample_id in seen:
                duplicate = Rejected(f"{source}:{record.source_id}", "duplicate source_id", record.source_id)
                quarantine.write(duplicate.to_row(source))
                rejected += 1
            else:
                seen.add(record.sample_id)
                samples.write(record.to_row())
                kept += 1
            if progress is not None and n % 256 == 0:
                progress(kept, rejected)
    if progress is not None:
        progress(kept, rejected)
    files = [str(p) for p in adapter.source_files()]
    summary = {"source": source, "root": str(Path(root).resolve()), "samples": kept,
               "quarantined": rejected, "source_files": files}
    (out / "ingest.json").write_text(json.dumps(summary, indent=2))
    return IngestResult(source, out, kept, rejected, files)
