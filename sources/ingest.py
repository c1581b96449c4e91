"""Run one adapter over a root and write samples, quarantine and images to a directory."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmcurate.core.images import ImageStore
from mmcurate.core.records import Rejected, Sample
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
    skipped: dict[str, int]

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
    store: ImageStore | None = None,
) -> IngestResult:
    """Ingest ``root`` with the ``source`` adapter into ``out``.

    ``samples.parquet`` and ``quarantine.parquet`` appear only when the run completes; a
    sample id seen twice is quarantined as a duplicate rather than written twice. Images go
    to ``out/images`` unless a shared ``store`` is given (flows share one across sources).
    """
    out = Path(out)
    store = store or ImageStore(out / "images")
    adapter = adapter_class(source)(root, store, images=images, options=options)
    seen: set[str] = set()
    kept = rejected = 0
    with (
        AtomicParquetWriter(out / "samples.parquet", SAMPLE) as samples,
        AtomicParquetWriter(out / "quarantine.parquet", QUARANTINE) as quarantine,
    ):
        for n, record in enumerate(adapter.records(), start=1):
            if isinstance(record, Sample):
                row, problem = _sample_row(record)
                if problem is None and record.sample_id in seen:
                    problem = "duplicate source_id"
                if problem is None:
                    seen.add(record.sample_id)
                    samples.write(row)
                    kept += 1
                else:
                    record = Rejected(f"{source}:{record.source_id}", problem, record.source_id)
            if isinstance(record, Rejected):
                quarantine.write(_storable(record.to_row(source)))
                rejected += 1
            if progress is not None and n % 256 == 0:
                progress(kept, rejected)
    if progress is not None:
        progress(kept, rejected)
    files = [str(p) for p in adapter.source_files()]
    skipped = dict(sorted(adapter.skipped.items()))
    summary = {"source": source, "root": str(Path(root).resolve()), "samples": kept,
               "quarantined": rejected, "skipped": skipped, "source_files": files}
    (out / "ingest.json").write_text(json.dumps(summary, indent=2))
    return IngestResult(source, out, kept, rejected, files, skipped)


def _sample_row(sample: Sample) -> tuple[dict[str, Any] | None, str | None]:
    """The sample's row, or why it cannot be stored: text that is not valid Unicode (JSON
    escapes may decode to lone surrogates, e.g. half an emoji ``"\\ud83d"`` in pushshift
    dumps, which Parquet cannot hold) or meta that is not JSON."""
    try:
        row = sample.to_row()
        json.dumps(row, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        return None, f"text is not valid Unicode: {exc.reason}"
    except (TypeError, ValueError) as exc:
        return None, f"sample cannot be stored: {type(exc).__name__}: {exc}"
    return row, None


def _storable(row: dict[str, Any]) -> dict[str, Any]:
    """A quarantine row whose strings can be written: lone surrogates become ``\\udXXX``."""
    for key, value in row.items():
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                row[key] = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return row


def root_fingerprint(root: Path | str, options: dict[str, Any] | None = None, depth: int = 2) -> str:
    """A cheap identity of a source root: names, sizes and mtimes of files up to ``depth``
    folders deep (image folders with millions of files are below that), plus the options.
    An ingest is redone when it changes."""
    from mmcurate.core.ids import stable_id

    root = Path(root).resolve()
    parts = [str(root), json.dumps(options or {}, sort_keys=True, default=str)]
    frontier = [(root, 0)]
    while frontier:
        folder, level = frontier.pop()
        for entry in sorted(folder.iterdir()):
            if entry.is_dir() and level < depth:
                frontier.append((entry, level + 1))
            elif entry.is_file():
                stat = entry.stat()
                parts.append(f"{entry.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns}")
    return stable_id(*parts)


def ingest_folder(workdir: Path, name: str, root: Path, options: dict[str, Any] | None = None) -> Path:
    """Where a flow keeps the ingest of one source root: redone when the root changes."""
    return Path(workdir) / "ingest" / f"{name}-{root_fingerprint(root, options)}"


def load_ingest(out: Path | str) -> IngestResult | None:
    """The result of a completed ingest in ``out`` (``ingest.json`` is written last), or None."""
    marker = Path(out) / "ingest.json"
    if not marker.is_file():
        return None
    data = json.loads(marker.read_text())
    return IngestResult(data["source"], Path(out), data["samples"], data["quarantined"],
                        data["source_files"], data.get("skipped", {}))
