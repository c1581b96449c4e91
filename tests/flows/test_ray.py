"""The same config on a local Ray cluster publishes the release of the thread runner (same
sample ids, data shard bytes and ledger verdicts), its stages run as shards on Ray workers.
Runs where ``prefect-ray`` is installed (``pip install 'mmcurate[ray]'``; the test extra has it)."""

from __future__ import annotations

import json
import math

import pytest

from mmcurate.core.config import TaskRunnerConfig
from mmcurate.tasks.runners import make_task_runner
from tests.flows import flowkit

pytest.importorskip("prefect_ray")
pytestmark = pytest.mark.slow
SHARD = 4


def test_ray_release_equals_the_thread_release(tmp_path_factory, fixtures_root, prefect_harness):
    from prefect_ray import RayTaskRunner

    home, threads = flowkit.baseline(tmp_path_factory, fixtures_root)
    runner = TaskRunnerConfig(kind="ray", workers=2, shard_size=SHARD)
    config = flowkit.scripted_config(
        home,
        fixtures_root,
        workdir="work-ray",
        releases_root="releases-ray",
        task_runner=runner.model_dump(),
        name="ray.yaml",
    )
    task_runner = make_task_runner(runner)
    assert isinstance(task_runner, RayTaskRunner) and task_runner.init_kwargs["num_cpus"] == 2

    on_ray, flow_run_id = flowkit.run_flow(config, task_runner)

    expected, got = flowkit.fingerprint(threads), flowkit.fingerprint(on_ray)
    assert got["sample_ids"] == expected["sample_ids"] and got["sample_ids"]
    assert got["shards"] == expected["shards"]
    assert got["verdicts"] == expected["verdicts"]
    funnel = {
        row["stage"]: row["remaining"]
        for row in json.loads((on_ray / "manifest.json").read_text())["statistics"]["funnel"]
    }
    # a fresh workdir: every Stage I and III call was made on the Ray workers, shard by shard
    (stage_i,) = flowkit.calls(on_ray, "I", "total")
    assert stage_i["calls"] == funnel["ingested"] and stage_i["failures"] == 0
    wanted = {
        "parametric-": math.ceil(funnel["ingested"] / SHARD),
        "oracle-": math.ceil(funnel["II knowledge pairing"] / SHARD),
    }
    assert wanted["parametric-"] > 1 and flowkit.shard_runs(flow_run_id, wanted) == wanted
