"""Ingest tasks: one per source, skipped when the same root was already ingested.

A source whose root splits into independent parts (``SourceAdapter.parts``: a Reddit dump
folder's month pairs or per-subreddit pairs) is ingested one part per task on the flow's task
runner (threads, Dask or Ray workers, like the curation stages), each into its own folder,
then merged in the parts' order: the same result, byte for byte, whichever worker finished
first. A finished part is not ingested again after a crash.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from prefect import get_run_logger, task, unmapped
from prefect.cache_policies import NO_CACHE

from mmcurate.core.config import SourceSpec
from mmcurate.core.images import ImageStore
from mmcurate.core.schema import QUARANTINE, SAMPLE
from mmcurate.core.tables import SpilledTable, read_table, write_table
from mmcurate.sources.ingest import IngestResult, ingest, ingest_folder, load_ingest, merge_ingests, source_parts


@task(name="ingest-source", cache_policy=NO_CACHE, task_run_name="ingest-{spec.name}")
def ingest_whole(spec: SourceSpec, out: Path, workdir: Path) -> IngestResult:
    return ingest(
        spec.name, spec.root, out, images=spec.images, options=spec.options, store=ImageStore(workdir / "images")
    )


@task(name="ingest-part", cache_policy=NO_CACHE, task_run_name="ingest-{spec.name}-{key}")
def ingest_part(spec: SourceSpec, key: str, options: dict[str, Any], out: Path, workdir: Path) -> IngestResult:
    return load_ingest(out) or ingest(
        spec.name, spec.root, out, images=spec.images, options=options, store=ImageStore(workdir / "images")
    )


@task(name="merge-ingests", cache_policy=NO_CACHE)
def merge_parts(parts: list[IngestResult], out: Path) -> IngestResult:
    return merge_ingests(parts, out)


def ingest_source(spec: SourceSpec, workdir: Path) -> IngestResult:
    """The source's ingest, from an earlier run when the same root and options were ingested;
    its one-line summary (samples, quarantine, skipped splits and records) goes to the run's log."""
    out = ingest_folder(workdir, spec.name, spec.root, spec.options)
    result = load_ingest(out)
    if result is None:
        parts = source_parts(spec.name, spec.root, spec.options)
        if len(parts) < 2:
            result = ingest_whole(spec, out, workdir)
        else:
            keys = [key for key, _ in parts]
            folders = [out / "parts" / key.replace("/", "_") for key in keys]
            futures = ingest_part.map(
                unmapped(spec), keys, [options for _, options in parts], folders, unmapped(workdir)
            )
            result = merge_parts(futures.result(), out)
    get_run_logger().info(result.summary())
    return result


def load_samples(results: list[IngestResult], limits: list[int | None] | None = None) -> tuple[pa.Table, pa.Table]:
    """All ingested samples (the first ``limit`` of a source when it has one) and all
    quarantine rows, concatenated in source order."""
    limits = limits or [None] * len(results)
    tables = [read_table(r.samples_path, SAMPLE) for r in results]
    tables = [t if n is None else t.slice(0, n) for t, n in zip(tables, limits)]
    samples = pa.concat_tables(tables) if tables else SAMPLE.empty_table()
    return samples, load_quarantine(results)


def spill_samples(results: list[IngestResult], limits: list[int | None], folder: Path) -> SpilledTable:
    """All ingested samples (the first ``limit`` of a source when it has one), in source order, as
    a spilled table: each source's ingested Parquet file read where it lies, a source cut by its
    limit written again under ``folder``, a batch at a time. Nothing is read whole."""
    parts: list[Path] = []
    for index, (result, limit) in enumerate(zip(results, limits)):
        whole = SpilledTable((Path(result.samples_path),), SAMPLE)
        if limit is None or limit >= whole.num_rows:
            parts.append(whole.parts[0])
            continue
        head: list[pa.RecordBatch] = []
        for batch in whole.batches():
            head.append(batch.slice(0, limit - sum(b.num_rows for b in head)))
            if sum(b.num_rows for b in head) >= limit:
                break
        parts.append(write_table(pa.Table.from_batches(head, schema=SAMPLE), folder / f"samples-{index:05d}.parquet"))
    return SpilledTable(tuple(parts), SAMPLE)


def load_quarantine(results: list[IngestResult]) -> pa.Table:
    """All quarantine rows, concatenated in source order."""
    return (
        pa.concat_tables([read_table(r.quarantine_path, QUARANTINE) for r in results])
        if results
        else QUARANTINE.empty_table()
    )
