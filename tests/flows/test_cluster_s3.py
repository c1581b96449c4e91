"""The dry-run DeflectionBench curation as a cluster runs it (issue 46 item 3): a Dask cluster
of two worker processes (one thread each), each with its own empty local working folder and
unable to see the flow's folders (its own mount namespace: tests/cluster.py), and
only the object store in common (the local moto S3 server, tests/s3_server.py): ``workdir``,
``releases_root`` and the response cache (``cache_url: parts+s3://...``) are in one bucket.

A worker is killed with SIGKILL mid-stage, by itself (not by a timer): the scripted models of
every worker log each finished call (its cache key, once the answer is in the cache), and the worker armed to die kills its own process when asked for
one more call after ``KILL_AFTER`` finished ones. The run fails (Dask is told to retry no task),
the rerun publishes the release, and asks none of the calls the killed run finished (their
cache keys, from the logs of both runs), and the release it publishes has the data files of
today's single-machine run of the same slice, byte for byte; ``verify`` passes on the S3 copy.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml
from distributed import Client, WorkerPlugin

from mmcurate.core.config import TaskRunnerConfig
from mmcurate.core.storage import MARKER, Location, complete_children
from mmcurate.models.backends.scripted import ScriptedBackend
from mmcurate.models.cache import cache_key
from mmcurate.tasks.runners import make_task_runner
from tests.cluster import isolated_cluster
from tests.dryrun import dryrun_config
from tests.flows import flowkit
from tests.releases.cli_helpers import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # one local run, a killed and a rerun on a cluster
KILL_AFTER = 5  # finished scripted calls before the armed worker kills itself at the next one
SHARD = 8
SOURCES = ("infoseek", "webqa")  # a slice of the dry run: every stage, fewer samples


def log_scripted_calls(log: Path, armed: Path | None = None) -> None:
    """Make this process's scripted models append each finished call's cache key to ``log``; while
    ``armed`` exists, the process that first has ``KILL_AFTER`` finished calls removes it and
    kills itself with SIGKILL when the next call is answered, before its answer is cached."""
    real = ScriptedBackend.run
    finished = 0

    def run(self: ScriptedBackend, requests: Any, on_result: Any) -> None:
        def logged(index: int, response: Any) -> None:
            nonlocal finished
            if armed is not None and finished >= KILL_AFTER:
                try:
                    armed.unlink()  # only one process wins the removal: only one dies
                except FileNotFoundError:
                    pass
                else:
                    os.kill(os.getpid(), signal.SIGKILL)
            on_result(index, response)
            if response.text is not None:  # a failed call is not cached, and may be asked again
                with log.open("a") as out:
                    out.write(cache_key(self.spec, requests[index], self.identity) + "\n")
                finished += 1

        real(self, requests, logged)

    ScriptedBackend.run = run  # type: ignore[method-assign]


class OwnFolder(WorkerPlugin):
    """Each worker process works in its own empty folder (scratch copies,
    current folder, temporary files) and logs its scripted calls there."""

    def __init__(self, base: str, armed: str | None) -> None:
        self.base, self.armed = base, armed

    def setup(self, worker: Any) -> None:
        folder = Path(self.base) / f"{worker.name}-{os.getpid()}"
        (folder / "tmp").mkdir(parents=True)
        os.environ["MMCURATE_SCRATCH"] = str(folder / "scratch")
        os.chdir(folder)
        tempfile.tempdir = str(folder / "tmp")
        log_scripted_calls(folder / "calls.log", Path(self.armed) if self.armed else None)


def cluster_config(local: Path, bucket: str, address: str, name: str) -> Path:
    """The local dry-run config with its workdir, releases and cache under ``bucket/name``, on the
    Dask cluster at ``address``."""
    data = yaml.safe_load(local.read_text())
    data["workdir"] = f"{bucket}/{name}/work"
    data["releases_root"] = f"{bucket}/{name}/releases"
    data["cache_url"] = f"parts+{bucket}/{name}/responses"
    data["task_runner"] = {"kind": "dask", "address": address, "shard_size": SHARD}
    path = local.with_name(f"{name}.yaml")
    path.write_text(yaml.safe_dump(data))
    return path


def data_files(release: Path) -> dict[str, bytes]:
    return {p.relative_to(release).as_posix(): p.read_bytes() for p in sorted((release / "data").rglob("*.parquet"))}


def stored_data_files(url: str) -> dict[str, bytes]:
    """The data files the release's marker names, read from the store."""
    stored = Location.parse(url)
    names = json.loads((stored / MARKER).read_bytes())["files"]
    return {
        name: (stored / name).read_bytes() for name in names if name.startswith("data/") and name.endswith(".parquet")
    }


def calls_logged(base: Path) -> Counter[str]:
    return Counter(line for log in sorted(base.rglob("calls.log")) for line in log.read_text().split())


@pytest.fixture
def cluster():
    """Start a cluster whose workers cannot see ``hidden`` (tests/cluster.py), each worker in its
    own folder under ``base`` (``OwnFolder``); closed when the test ends."""
    with ExitStack() as stack:

        def start(hidden: Path, base: Path, armed: Path) -> Any:
            workers = stack.enter_context(isolated_cluster(hidden))
            with Client(workers) as client:
                client.register_plugin(OwnFolder(str(base), str(armed)))
            return workers

        yield start


def test_a_cluster_sharing_only_s3_survives_a_killed_worker_and_publishes_the_local_release(
    tmp_path, fixtures_root, prefect_harness, s3_bucket, cluster, monkeypatch, capsys
):
    from mmcurate.flows.deflectionbench.curate import deflectionbench

    # today's single-machine run (threads, plain paths) of the same slice: the reference release;
    # everything of the flow's side is under flow/, which no worker can see (tests/cluster.py)
    flow = tmp_path / "flow"
    (flow / "local").mkdir(parents=True)
    local = dryrun_config(flow / "local", fixtures_root, sources=SOURCES)
    release = Path(deflectionbench(config=str(local)))

    monkeypatch.setenv("MMCURATE_SCRATCH", str(flow / "scratch"))  # the flow's own folder
    armed = tmp_path / "armed"
    armed.touch()
    monkeypatch.setattr(ScriptedBackend, "run", ScriptedBackend.run)  # the real one is back after the test
    log_scripted_calls(flow / "calls.log")  # the calls the flow process answers itself
    workers = cluster(flow, tmp_path / "workers", armed)
    config = cluster_config(local, s3_bucket, workers.scheduler_address, "cluster")
    runner = make_task_runner(TaskRunnerConfig(kind="dask", address=workers.scheduler_address, shard_size=SHARD))
    with pytest.raises(Exception, match="(?i)killed|worker"):
        flowkit.run_flow(config, runner)
    assert not armed.exists()  # a worker died by its own hand, mid-stage
    client = Client(workers)
    flowkit.wait_for(lambda: not any(client.processing().values()), "the failed run's other tasks to end")
    client.close()
    killed_run = calls_logged(tmp_path)
    assert sum(killed_run.values()) >= KILL_AFTER

    runner = make_task_runner(TaskRunnerConfig(kind="dask", address=workers.scheduler_address, shard_size=SHARD))
    flowkit.run_flow(config, runner)
    url = f"{s3_bucket}/cluster/releases/deflectionbench/1.0.0"
    assert complete_children(Location.parse(f"{s3_bucket}/cluster/releases/deflectionbench")) == ["1.0.0"]
    rerun = calls_logged(tmp_path) - killed_run
    assert rerun  # the rerun answered what the killed run had not
    assert sorted(set(killed_run) & set(rerun)) == []  # and asked no call the killed run finished
    assert stored_data_files(url) == data_files(release)  # the local run's release, byte for byte
    work = Location.parse(f"{s3_bucket}/cluster/work")
    assert complete_children(work / "ingest") and complete_children(work / "indexes")  # shared, not per worker
    code, out, err = run_cli(capsys, monkeypatch, "verify", url)
    assert code == 0 and out.strip().endswith("verified"), (out, err)
