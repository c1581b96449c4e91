"""A Reddit dump folder is ingested one month per task on a Dask cluster of two worker
processes, and the merged result is byte-identical to one sequential ingest."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefect import flow
from prefect_dask import DaskTaskRunner

from mmcurate.core.config import Settings, SourceSpec
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
        return ingest_source(SourceSpec(name="reddit", root=root), Settings(workdir=tmp_path / "work")).out

    merged = ingest_months()
    assert merged != sequential.out and (merged / "parts").is_dir()  # really ran per month
    assert sequential.samples > 0
    for name in ("samples.parquet", "quarantine.parquet"):
        assert (merged / name).read_bytes() == (sequential.out / name).read_bytes(), name
    again = ingest_months()  # a finished ingest is reused, not redone
    assert again == merged


def test_months_on_workers_that_share_only_s3_are_published_and_reused_elsewhere(
    tmp_path: Path, fixtures_root: Path, prefect_harness, s3_bucket: str, monkeypatch
) -> None:
    """Issue 46: with the workdir in an object store, each month is ingested on a worker that
    cannot see the flow's folders (tests/cluster.py), published to the store, fetched by the
    flow for the merge; the merged ingest is published too, and another machine (an empty
    scratch folder) reuses it without ingesting anything."""
    from mmcurate.tasks import ingest as ingest_tasks
    from tests.cluster import isolated_cluster

    root = fixtures_root / "reddit"
    sequential = ingest("reddit", root, tmp_path / "sequential", store=ImageStore(tmp_path / "seq-images"))
    settings_url = f"{s3_bucket}/work"
    monkeypatch.setenv("MMCURATE_SCRATCH", str(tmp_path / "flow" / "scratch"))
    with isolated_cluster(tmp_path / "flow") as cluster:

        @flow(task_runner=DaskTaskRunner(address=cluster.scheduler_address))
        def on_the_cluster() -> Path:
            return ingest_source(SourceSpec(name="reddit", root=root), Settings(workdir=settings_url)).out

        merged = on_the_cluster()
    for name in ("samples.parquet", "quarantine.parquet"):
        assert (merged / name).read_bytes() == (sequential.out / name).read_bytes(), name

    monkeypatch.setenv("MMCURATE_SCRATCH", str(tmp_path / "elsewhere"))  # a machine that ingested nothing
    monkeypatch.setattr(ingest_tasks, "ingest", lambda *a, **k: pytest.fail("a published ingest was redone"))

    @flow
    def elsewhere() -> Path:
        return ingest_source(SourceSpec(name="reddit", root=root), Settings(workdir=settings_url)).out

    again = elsewhere()
    assert again.is_relative_to(tmp_path / "elsewhere") and not (again / "parts").exists()
    for name in ("samples.parquet", "quarantine.parquet"):
        assert (again / name).read_bytes() == (sequential.out / name).read_bytes(), name
