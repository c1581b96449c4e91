"""A Reddit dump folder is ingested one month per task on a Dask cluster of two worker
processes, and the merged result is byte-identical to one sequential ingest."""

from __future__ import annotations

from pathlib import Path

from prefect import flow
from prefect_dask import DaskTaskRunner

from mmcurate.core.config import SourceSpec
from mmcurate.core.images import ImageStore
from mmcurate.sources.ingest import ingest
from mmcurate.sources.reddit import dump_pairs
from mmcurate.tasks.ingest import ingest_source


def test_months_on_two_dask_workers_equal_one_sequential_ingest(
    tmp_path: Path, fixtures_root: Path, prefect_harness
) -> None:
    root = fixtures_root / "reddit"
    assert len(dump_pairs(root)) >= 2  # the fixture has two months
    sequential = ingest("reddit", root, tmp_path / "sequential", store=ImageStore(tmp_path / "seq-images"))

    cluster = {"n_workers": 2, "threads_per_worker": 1, "processes": True, "dashboard_address": None}

    @flow(task_runner=DaskTaskRunner(cluster_kwargs=cluster))
    def ingest_months() -> Path:
        return ingest_source(SourceSpec(name="reddit", root=root), tmp_path / "work").out

    merged = ingest_months()
    assert merged != sequential.out and (merged / "parts").is_dir()  # really ran per month
    assert sequential.samples > 0
    for name in ("samples.parquet", "quarantine.parquet"):
        assert (merged / name).read_bytes() == (sequential.out / name).read_bytes(), name
    again = ingest_months()  # a finished ingest is reused, not redone
    assert again == merged
