"""A Dask cluster whose workers share no folder with the flow, on one machine.

``isolated_cluster(hidden)`` starts a scheduler in this process and worker processes (``dask
worker``, with its nanny) each in its own mount namespace (``unshare -m``, or ``unshare -rm`` in
a user namespace when not root), where ``hidden`` is an empty tmpfs: whatever the flow keeps
there (its working copies of the workdir, its scratch, the reference run) does not exist for a
worker, as on a cluster of machines. A worker reaches the flow's data only through what both
share: the object store (the local S3 server) and the installed code and bundled inputs.

A worker that dies is not retried (``allowed-failures`` 0): a killed worker fails the run, and
the rerun is the user's. Where no mount namespace can be made, the tests that need one skip.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


def namespace_command() -> list[str]:
    """The ``unshare`` invocation that gives a process its own mount namespace here."""
    for command in (["unshare", "-m"], ["unshare", "-rm"]):
        try:
            done = subprocess.run([*command, "true"], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return command
    pytest.skip("no mount namespace here (unshare -m or -rm): a worker cannot be kept out of the flow's folders")


@contextmanager
def isolated_cluster(hidden: Path, n_workers: int = 2) -> Iterator[Any]:
    """A ``distributed.LocalCluster`` (the scheduler) with ``n_workers`` one-thread worker
    processes that see ``hidden`` as an empty folder (module docstring)."""
    import dask
    from distributed import Client, LocalCluster

    prefix = namespace_command()
    hidden.mkdir(parents=True, exist_ok=True)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = LocalCluster(n_workers=0, processes=True, dashboard_address=None)
    workers = []
    try:
        for index in range(n_workers):
            worker = (
                f"{shlex.quote(sys.executable)} -m distributed.cli.dask_worker {cluster.scheduler_address}"
                f" --nthreads 1 --nworkers 1 --no-dashboard --name worker-{index}"
            )
            script = f"mount -t tmpfs tmpfs {shlex.quote(str(hidden))} && exec {worker}"
            workers.append(subprocess.Popen([*prefix, "sh", "-c", script], start_new_session=True))
        with Client(cluster) as client:
            client.wait_for_workers(n_workers, timeout=300)
        yield cluster
    finally:
        for worker in workers:
            try:
                os.killpg(worker.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for worker in workers:
            try:
                worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
        cluster.close()
