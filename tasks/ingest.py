"""Ingest tasks: one per source, skipped when the same root was already ingested."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from prefect import task
from prefect.cache_policies import NO_CACHE

from mmcurate.core.config import SourceSpec
from mmcurate.core.images import ImageStore
from mmcurate.core.schema import QUARANTINE, SAMPLE
from mmcurate.core.tables import read_table
from mmcurate.sources.ingest import IngestResult, ingest, ingest_folder, load_ingest


@task(name="ingest-source", cache_policy=NO_CACHE, task_run_name="ingest-{spec.name}")
def ingest_source(spec: SourceSpec, workdir: Path) -> IngestResult:
    out = ingest_folder(workdir, spec.name, spec.root, spec.options)
    done = load_ingest(out)
    if done is not None:
        return done
    return ingest(spec.name, spec.root, out, images=spec.images, options=spec.options,
                  store=ImageStore(workdir / "images"))


def load_samples(results: list[IngestResult], limits: list[int | None] | None = None) -> tuple[pa.Table, pa.Table]:
    """All ingested samples (the first ``limit`` of a source when it has one) and all
    quarantine rows, concatenated in source order."""
    limits = limits or [None] * len(results)
    tables = [read_table(r.samples_path, SAMPLE) for r in results]
    tables = [t if n is None else t.slice(0, n) for t, n in zip(tables, limits)]
    samples = pa.concat_tables(tables) if tables else SAMPLE.empty_table()
    quarantine = (pa.concat_tables([read_table(r.quarantine_path, QUARANTINE) for r in results])
                  if results else QUARANTINE.empty_table())
    return samples, quarantine
