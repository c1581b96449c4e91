"""kill -9 a flow run in the middle of Stage I, rerun it: no finished call is repeated and
the release equals the one of an uninterrupted run.

Bounded time: the crashed run starts from a fresh workdir whose response cache holds only
the uninterrupted (baseline) run's Stage III answers, copied in before the start. Stage I
therefore starts from nothing and is what gets killed and resumed; Stage III is answered
from the cache when Stage I reaches the baseline's verdicts again, and would be called
otherwise (which would show in the calls table and fail the comparison).
The baseline shares nothing else with the crashed run (own workdir, own releases).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mmcurate.gating.cache import ResponseCache
from mmcurate.gating.prompts import PARAMETRIC
from mmcurate.releases.reader import list_versions

import flowkit  # noqa: E402

pytestmark = pytest.mark.slow
KILL_DEADLINE = 300.0


def _half_written(root: Path) -> list[str]:
    """Version folders that a reader could mistake for a release: no manifest, not .tmp-*."""
    folder = root / "deflectionbench"
    if not folder.is_dir():
        return []
    return [p.name for p in folder.iterdir()
            if p.is_dir() and not p.name.startswith(".tmp-") and not (p / "manifest.json").is_file()]


def test_kill9_mid_stage_i_then_resume(tmp_path, fixtures_root, tmp_path_factory, prefect_harness):
    from prefect.settings import get_current_settings

    base_home, base_release = flowkit.baseline(tmp_path_factory, fixtures_root)
    (base_i,) = flowkit.calls(base_release, "I", "parametric")
    total = base_i["calls"] + base_i["cache_hits"]
    config = flowkit.write_config(tmp_path, fixtures_root)
    cache_file = flowkit.cache_path(tmp_path)
    cache_file.parent.mkdir(parents=True)
    seeded = flowkit.copy_cache(flowkit.cache_path(base_home), cache_file, keep=f"template != '{PARAMETRIC.id}'")
    assert seeded > 0

    env = {**os.environ, "PREFECT_API_URL": str(get_current_settings().api.url),  # the harness's API
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "HF_HUB_OFFLINE": "1"}
    mmcurate = Path(sys.executable).parent / "mmcurate"
    child = subprocess.Popen([str(mmcurate), "run", "deflectionbench", "--config", str(config)],
                             cwd=tmp_path, env=env, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=(tmp_path / "crashed.log").open("wb"))
    cache = ResponseCache.open(f"sqlite:///{cache_file}")
    try:
        deadline = time.monotonic() + KILL_DEADLINE
        while cache.count() - seeded < 1 and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(child.pid, signal.SIGKILL)  # the flow, its llama.cpp server, everything
        child.wait(timeout=30)
        finished = cache.count() - seeded
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    assert child.returncode == -signal.SIGKILL, (tmp_path / "crashed.log").read_text()[-3000:]
    assert 0 < finished < total, f"killed with {finished} of {total} Stage I calls done"

    # nothing half-written is visible; a crash inside the writer leaves only a .tmp-* folder
    releases = tmp_path / "releases"
    assert _half_written(releases) == [] and list_versions(releases, "deflectionbench") == []
    leftover = releases / "deflectionbench" / ".tmp-1.0.0-deadbeef"
    (leftover / "data").mkdir(parents=True)
    (leftover / "data" / "test-00000-of-00001.parquet").write_bytes(b"PAR1 truncated")
    assert list_versions(releases, "deflectionbench") == []

    resumed, _ = flowkit.run_flow(config)

    assert list_versions(releases, "deflectionbench") == ["1.0.0"] and _half_written(releases) == []
    (stage_i,) = flowkit.calls(resumed, "I", "parametric")
    assert stage_i["cache_hits"] == finished  # every call finished before the kill was reused
    assert stage_i["calls"] == total - finished and stage_i["failures"] == 0  # and none repeated
    assert cache.count() - seeded == total
    (stage_iii,) = flowkit.calls(resumed, "III", "total")
    assert stage_iii["calls"] == 0
    expected, got = flowkit.fingerprint(base_release), flowkit.fingerprint(resumed)
    assert got["sample_ids"] == expected["sample_ids"]
    assert got["shards"] == expected["shards"]
    assert got["verdicts"] == expected["verdicts"]
    cache.close()
