"""The same config on the thread runner and on a Dask LocalCluster of two worker processes
publishes the same release: same sample ids, same data shard bytes, same ledger verdicts.

Both runs share one workdir, so the Dask workers read and write the thread run's SQLite
response cache from two processes at once (WAL, busy timeout): that sharing is part of
what is tested. The Stage I answers are deleted from the cache first, so the Dask workers
answer those again (the scripted reader, in each worker process; shards of 4 samples) and
must reach the same verdicts; Stage III is then answered from the shared cache.
"""

from __future__ import annotations

import json
import math

import pytest

from mmcurate.core.config import TaskRunnerConfig
from mmcurate.gating.prompts import PARAMETRIC
from mmcurate.releases.reader import open_release
from mmcurate.tasks.runners import make_task_runner
from tests.flows import flowkit

pytestmark = pytest.mark.slow
SHARD = 4


def test_dask_release_equals_the_thread_release(tmp_path_factory, fixtures_root, prefect_harness):
    home, threads = flowkit.baseline(tmp_path_factory, fixtures_root)
    assert open_release(threads).sample_ids
    redo = flowkit.forget(flowkit.cache_path(home), f"template = '{PARAMETRIC.id}'")
    assert redo > 0
    runner = TaskRunnerConfig(kind="dask", workers=2, shard_size=SHARD)
    config = flowkit.scripted_config(
        home, fixtures_root, releases_root="releases-dask", task_runner=runner.model_dump(), name="dask.yaml"
    )

    on_dask, flow_run_id = flowkit.run_flow(config, make_task_runner(runner))

    assert on_dask.parent.parent == home / "releases-dask" and on_dask != threads
    expected, got = flowkit.fingerprint(threads), flowkit.fingerprint(on_dask)
    assert got["sample_ids"] == expected["sample_ids"] and got["sample_ids"]
    assert got["shards"] == expected["shards"] and got["shards"]
    assert got["verdicts"] == expected["verdicts"]
    # the deleted Stage I answers were recomputed on the workers; Stage III was all cache hits
    (stage_i,) = flowkit.calls(on_dask, "I", "total")
    assert (stage_i["calls"], stage_i["failures"]) == (redo, 0)
    (stage_iii,) = flowkit.calls(on_dask, "III", "total")
    assert stage_iii["calls"] == 0 and stage_iii["cache_hits"] > 0
    # Stage I and III really ran as shards
    funnel = {
        row["stage"]: row["remaining"]
        for row in json.loads((on_dask / "manifest.json").read_text())["statistics"]["funnel"]
    }
    wanted = {
        "parametric-": math.ceil(funnel["ingested"] / SHARD),
        "oracle-": math.ceil(funnel["II knowledge pairing"] / SHARD),
    }
    assert flowkit.shard_runs(flow_run_id, wanted) == wanted
