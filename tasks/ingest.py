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

from mmcurate.core.config import Settings, SourceSpec
from mmcurate.core.errors import MmcurateError
from mmcurate.core.images import ImageStore
from mmcurate.core.schema import QUARANTINE, SAMPLE
from mmcurate.core.storage import Mirror
from mmcurate.core.tables import SpilledTable, read_table, write_table
from mmcurate.sources.ingest import IngestResult, ingest, ingest_folder, load_ingest, merge_ingests, source_parts

PARTS = "parts"  # a split source's part folders, inside its ingest folder


@task(name="ingest-source", cache_policy=NO_CACHE, task_run_name="ingest-{spec.name}")
def ingest_whole(spec: SourceSpec, out: Path, store: ImageStore) -> IngestResult:
    return ingest(spec.name, spec.root, out, images=spec.images, options=spec.options, store=store)


@task(name="ingest-part", cache_policy=NO_CACHE, task_run_name="ingest-{spec.name}-{key}")
def ingest_part(spec: SourceSpec, key: str, options: dict[str, Any], relative: str, settings: Settings) -> str:
    """Ingest one part into ``workdir/relative`` where the task runs (a worker's own copy of the
    workdir), then publish it to the workdir's store, if any; a part published by an earlier
    run is fetched, not ingested again."""
    settings = settings.on_this_machine()
    workdir = settings.mirror("workdir")
    out = workdir.local / relative
    if not workdir.pull(relative) or load_ingest(out) is None:
        ingest(spec.name, spec.root, out, images=spec.images, options=options, store=settings.image_store())
    workdir.push(relative)
    return relative


@task(name="merge-ingests", cache_policy=NO_CACHE)
def merge_parts(parts: list[IngestResult], out: Path) -> IngestResult:
    return merge_ingests(parts, out)


def _finished(workdir: Mirror, relative: str) -> IngestResult:
    """The part a task ingested at ``workdir/relative``, fetched from the store if a worker made it."""
    workdir.pull(relative)
    part = load_ingest(workdir.local / relative)
    if part is None:
        raise MmcurateError(f"the ingest part {relative} finished, but neither the workdir nor its store holds it")
    return part


def ingest_source(spec: SourceSpec, settings: Settings) -> IngestResult:
    """The source's ingest, from an earlier run when the same root and options were ingested
    (here, or published to the workdir's object store by a run on another machine); its
    one-line summary (samples, quarantine, skipped splits and records) goes to the run's log.
    With a workdir in an object store the finished ingest is published there (without its
    parts' folders: the merged files hold them)."""
    workdir = settings.mirror("workdir")
    out = ingest_folder(workdir.local, spec.name, spec.root, spec.options)
    relative = out.relative_to(workdir.local).as_posix()
    workdir.pull(relative)
    result = load_ingest(out)
    if result is None:
        parts = source_parts(spec.name, spec.root, spec.options)
        if len(parts) < 2:
            result = ingest_whole(spec, out, settings.image_store())
        else:
            folders = [f"{relative}/{PARTS}/{key.replace('/', '_')}" for key, _ in parts]
            futures = ingest_part.map(
                unmapped(spec),
                [key for key, _ in parts],
                [options for _, options in parts],
                folders,
                unmapped(settings),
            )
            result = merge_parts([_finished(workdir, folder) for folder in futures.result()], out)
        workdir.push(relative, exclude=(PARTS,))
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
