"""Run one adapter over a root and write samples, quarantine and images to a directory;
merge several such outputs into one.

An output folder holds ``samples.parquet``, ``quarantine.parquet``, ``locators.parquet``
(where each sample was read: ``sample_id``, ``locator``, in sample order), ``images/``
(unless a shared store was used) and ``ingest.json``, written last: counts, skip reasons,
the source files and, under ``reader``, how they were read where an install can differ
(``{"line_picker": "c"}`` or ``"python"`` for Reddit dumps).

Whatever an adapter yields, a sample is stored only when its row is valid Unicode, JSON-able
and at most ``MAX_SAMPLE_BYTES`` (a 20 MB question is bad input, not a sample); otherwise
it is quarantined at its locator with the raw record. Quarantine text keeps undecodable
bytes as ``\\xNN`` escapes, so the raw record shows what the file held.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from mmcurate.core.errors import MmcurateError
from mmcurate.core.ids import stable_id
from mmcurate.core.images import ImageStore
from mmcurate.core.plural import counted, listed
from mmcurate.core.records import Rejected, Sample
from mmcurate.core.schema import QUARANTINE, SAMPLE
from mmcurate.core.tables import AtomicParquetWriter

from . import adapter_class
from .base import TOO_DEEP, Located

Progress = Callable[[int, int], None]
MAX_SAMPLE_BYTES = 1 << 20  # a stored sample row (UTF-8 JSON, images by hash) larger than this is quarantined
# what ``mmcurate ingest``'s line says of a reading (``SourceAdapter.reading``; ``ingest.json`` keeps the values)
READINGS = {
    ("line_picker", "c"): "lines picked by the compiled C scanner",
    ("line_picker", "python"): "lines picked in pure Python (same output, slower: no C scanner built, "
    "or MMCURATE_PURE_PICKER=1)",
}
LOCATORS = pa.schema(
    [pa.field("sample_id", pa.string(), nullable=False), pa.field("locator", pa.string(), nullable=False)]
)


@dataclass(frozen=True)
class IngestResult:
    source: str
    out: Path
    samples: int
    quarantined: int
    source_files: list[str]
    skipped: dict[str, int]
    reader: dict[str, str] = field(default_factory=dict)  # SourceAdapter.reading()

    def summary(self) -> str:
        """One line for the console: what went where, and every skip with its reason."""
        line = (
            f"{self.source}: {counted(self.samples, 'sample')} -> {self.samples_path}; "
            f"{self.quarantined} quarantined -> {self.quarantine_path}"
        )
        skipped = {reason: count for reason, count in self.skipped.items() if count}
        if skipped:
            line += "; skipped: " + ", ".join(f"{count} ({reason})" for reason, count in skipped.items())
        return line + "".join(
            f"; {READINGS.get((key, value), f'{key}: {value}')}" for key, value in self.reader.items()
        )

    @property
    def samples_path(self) -> Path:
        return self.out / "samples.parquet"

    @property
    def quarantine_path(self) -> Path:
        return self.out / "quarantine.parquet"

    @property
    def locators_path(self) -> Path:
        return self.out / "locators.parquet"

    @property
    def images_dir(self) -> Path:
        return self.out / "images"


@contextmanager
def _collector_spares_older_objects() -> Iterator[None]:
    """Freeze what is alive when an ingest starts (imported modules, loaded models: a few
    hundred thousand objects) out of the garbage collector's full passes until it ends.

    An ingest allocates many short-lived objects, so full passes come, and each would walk
    that whole older heap while holding the GIL, stalling the thread that decompresses
    too (measured: one such pass took 0.08 s of a 0.8 s ingest). Frozen objects are only
    skipped, never freed; they rejoin the oldest generation afterwards. Freezing is
    process-wide, so two ingests overlapping in threads may end each other's freeze early,
    which costs time only.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def source_parts(
    source: str, root: Path | str, options: dict[str, Any] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """The parts of a source root to ingest apart (``SourceAdapter.parts``); [] for one ingest."""
    return adapter_class(source).parts(Path(root), options or {})


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
    sample id seen twice is quarantined as a duplicate rather than written twice, located
    where its second copy was read. Images go
    to ``out/images`` unless a shared ``store`` is given (flows share one across sources).
    An ``out`` that holds another source's ingest is refused (its samples would be replaced
    and its images left among the new ones).
    """
    out = Path(out)
    earlier = load_ingest(out) if out.is_dir() else None
    if earlier is not None and earlier.source != source:
        raise MmcurateError(
            f"{out} holds an ingest of {earlier.source} ({counted(earlier.samples, 'sample')}): "
            f"write the {source} ingest to another --out, or remove {out} first"
        )
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file where the folder should be, no permission
        raise MmcurateError(f"cannot use {out} as the output folder: {exc.strerror or exc}") from None
    try:
        return _ingest_into(source, root, out, images, options, progress, store or ImageStore(out / "images"))
    except BaseException:
        if created:  # a refused or broken ingest leaves no folder behind that looks like an output
            shutil.rmtree(out, ignore_errors=True)
        raise


def _ingest_into(
    source: str,
    root: Path | str,
    out: Path,
    images: Path | str | None,
    options: dict[str, Any] | None,
    progress: Progress | None,
    store: ImageStore,
) -> IngestResult:
    adapter = adapter_class(source)(root, store, images=images, options=options)
    seen: set[str] = set()
    kept = rejected = 0
    with (
        _collector_spares_older_objects(),
        AtomicParquetWriter(out / "samples.parquet", SAMPLE) as samples,
        AtomicParquetWriter(out / "quarantine.parquet", QUARANTINE) as quarantine,
        AtomicParquetWriter(out / "locators.parquet", LOCATORS) as locators,
    ):
        for n, record in enumerate(adapter.records(), start=1):
            if isinstance(record, Located):
                sample = record.sample
                row, problem = _sample_row(sample)
                if problem is None and sample.sample_id in seen:
                    problem = "duplicate source_id"
                if problem is None:
                    assert row is not None  # _sample_row gives a row or its problem
                    seen.add(sample.sample_id)
                    samples.write(row)
                    locators.write({"sample_id": sample.sample_id, "locator": record.locator})
                    kept += 1
                else:
                    record = Rejected(
                        record.locator, problem, record.raw if record.raw is not None else sample.source_id
                    )
            if isinstance(record, Rejected):
                quarantine.write(_storable(record.to_row(source)))
                rejected += 1
            if progress is not None and n % 256 == 0:
                progress(kept, rejected)
    if progress is not None:
        progress(kept, rejected)
    files = [str(p) for p in adapter.source_files()]
    return _finish(
        out, source, str(Path(root).resolve()), kept, rejected, dict(adapter.skipped), files, adapter.reading()
    )


def merge_ingests(parts: Sequence[IngestResult], out: Path | str) -> IngestResult:
    """One output from several ingests of the same source (e.g. one per dump month, run in
    parallel), in the order ``parts`` are given, whatever order they finished in.

    Samples and quarantine rows keep their order part after part; a sample id already
    taken by an earlier part is quarantined as ``duplicate source_id`` at its own locator,
    after the quarantine rows of its part. Skip counts add up; images are linked (or
    copied) into ``out/images`` from parts that have their own. With parts given in
    ``dump_pairs`` order and no id repeated across parts, the result is byte-identical to
    one ingest of all of them.
    """
    out = Path(out)
    if not parts:
        raise MmcurateError("nothing to merge: no ingest outputs given")
    sources = {part.source for part in parts}
    if len(sources) > 1:
        raise MmcurateError(f"cannot merge ingests of different sources: {listed(sorted(sources))}")
    source = parts[0].source
    seen: set[str] = set()
    kept = rejected = 0
    skipped: dict[str, int] = {}
    with (
        AtomicParquetWriter(out / "samples.parquet", SAMPLE) as samples,
        AtomicParquetWriter(out / "quarantine.parquet", QUARANTINE) as quarantine,
        AtomicParquetWriter(out / "locators.parquet", LOCATORS) as locators,
    ):
        for part in parts:
            for row in _rows(part.quarantine_path):
                quarantine.write(row)
                rejected += 1
            for row, where in zip(_rows(part.samples_path), _rows(part.locators_path), strict=True):
                if row["sample_id"] in seen:
                    quarantine.write(
                        {
                            "source": source,
                            "locator": where["locator"],
                            "reason": "duplicate source_id",
                            "raw": row["source_id"],
                        }
                    )
                    rejected += 1
                else:
                    seen.add(row["sample_id"])
                    samples.write(row)
                    locators.write(where)
                    kept += 1
            for reason, count in part.skipped.items():
                skipped[reason] = skipped.get(reason, 0) + count
            _link_images(part.images_dir, out / "images")
    root = json.loads((parts[0].out / "ingest.json").read_text())["root"]
    files = [f for part in parts for f in part.source_files]
    reader = {
        key: "+".join(sorted({part.reader[key] for part in parts if key in part.reader}))
        for key in sorted({key for part in parts for key in part.reader})
    }  # "c+python" if workers differed
    return _finish(out, source, root, kept, rejected, skipped, files, reader)


def _finish(
    out: Path,
    source: str,
    root: str,
    kept: int,
    rejected: int,
    skipped: dict[str, int],
    files: list[str],
    reader: dict[str, str],
) -> IngestResult:
    """Write ``ingest.json``, the mark of a complete output, and describe the output."""
    skipped = {reason: count for reason, count in sorted(skipped.items()) if count}  # a reason met 0 times: none
    summary = {
        "source": source,
        "root": root,
        "samples": kept,
        "quarantined": rejected,
        "skipped": skipped,
        "source_files": files,
        "reader": reader,
    }
    (out / "ingest.json").write_text(json.dumps(summary, indent=2))
    return IngestResult(source, out, kept, rejected, files, skipped, reader)


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a Parquet file, a batch at a time."""
    for batch in pq.ParquetFile(path).iter_batches():
        yield from batch.to_pylist()


def _link_images(folder: Path, target: Path) -> None:
    """Hard-link (or copy) every image of ``folder`` to the same place under ``target``."""
    if not folder.is_dir() or folder.resolve() == target.resolve():
        return
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.name.endswith(".tmp"):
            dest = target / path.relative_to(folder)
            if not dest.exists():
                dest.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(path, dest)
                except OSError:  # another file system
                    shutil.copyfile(path, dest)


def _sample_row(sample: Sample) -> tuple[dict[str, Any] | None, str | None]:
    """The sample's row, or why it cannot be stored: text that is not valid Unicode (JSON
    escapes may decode to lone surrogates, e.g. half an emoji ``"\\ud83d"`` in pushshift
    dumps, which Parquet cannot hold), meta that is not JSON (or nested too deeply), or a
    row larger than ``MAX_SAMPLE_BYTES``."""
    try:
        row = sample.to_row()
        size = len(json.dumps(row, ensure_ascii=False).encode("utf-8"))
    except UnicodeEncodeError as exc:
        return None, f"text is not valid Unicode: {exc.reason}"
    except RecursionError:
        return None, f"sample cannot be stored: {TOO_DEEP}"
    except (TypeError, ValueError) as exc:
        return None, f"sample cannot be stored: {type(exc).__name__}: {exc}"
    if size > MAX_SAMPLE_BYTES:
        return None, f"sample larger than {MAX_SAMPLE_BYTES} bytes ({size})"
    return row, None


def _escaped(text: str) -> str:
    """``text`` as valid Unicode: bytes the reader could not decode (held as surrogate
    escapes) become ``\\xNN``, lone surrogates from JSON escapes ``\\udXXX``."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _storable(row: dict[str, Any]) -> dict[str, Any]:
    """A quarantine row whose strings can be written (see ``_escaped``)."""
    return {key: _escaped(value) if isinstance(value, str) else value for key, value in row.items()}


def root_fingerprint(root: Path | str, options: dict[str, Any] | None = None, depth: int = 2) -> str:
    """A cheap identity of a source root: names, sizes and mtimes of files up to ``depth``
    folders deep (image folders with millions of files are below that), plus the options.
    An ingest is redone when it changes."""
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
    return IngestResult(
        data["source"],
        Path(out),
        data["samples"],
        data["quarantined"],
        data["source_files"],
        data.get("skipped", {}),
        data.get("reader", {}),
    )
