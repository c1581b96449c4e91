"""kill -9 a flow run in the middle of Stage I, rerun it: no finished call is repeated and
the release equals the one of an uninterrupted run.

No timing window: the run's model is the deterministic stub server (tests/flows/flowkit.py),
which answers ``ADMIT`` requests and then holds the next one unanswered. The test waits
(generously) until that request has arrived and the answers before it are in the response
cache, then kills the whole process group: exactly ``ADMIT`` Stage I calls were finished.
The rerun goes through the same stub, no longer holding anything. The uninterrupted run is
the shared baseline on the scripted backend, which answers by the same script.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from mmcurate.releases.reader import list_versions
from tests.flows import flowkit

pytestmark = pytest.mark.slow
ADMIT = 5


def _half_written(root: Path) -> list[str]:
    """Version folders that a reader could mistake for a release: no manifest, not .tmp-*."""
    folder = root / "deflectionbench"
    if not folder.is_dir():
        return []
    return [
        p.name
        for p in folder.iterdir()
        if p.is_dir() and not p.name.startswith(".tmp-") and not (p / "manifest.json").is_file()
    ]


def test_kill9_mid_stage_i_then_resume(tmp_path, fixtures_root, tmp_path_factory, prefect_harness):
    _, base_release = flowkit.baseline(tmp_path_factory, fixtures_root)
    (base_i,) = flowkit.calls(base_release, "I", "parametric")
    (base_iii,) = flowkit.calls(base_release, "III", "total")
    total_i = base_i["calls"] + base_i["cache_hits"]
    with flowkit.StubModel(flowkit.DRYRUN / "vlm-reader.jsonl", flowkit.READER["default"], admit=ADMIT) as stub:
        config = flowkit.scripted_config(tmp_path, fixtures_root, models={"vlm-reader": flowkit.stub_spec(stub)})
        assert flowkit.kill9_after_admitted(config, tmp_path, stub, ADMIT) == -signal.SIGKILL

        # nothing half-written is visible; a crash inside the writer leaves only a .tmp-* folder
        releases = tmp_path / "releases"
        assert _half_written(releases) == [] and list_versions(releases, "deflectionbench") == []
        leftover = releases / "deflectionbench" / ".tmp-1.0.0-deadbeef"
        (leftover / "data").mkdir(parents=True)
        (leftover / "data" / "test-00000-of-00001.parquet").write_bytes(b"PAR1 truncated")
        assert list_versions(releases, "deflectionbench") == []

        stub.admit_left = None
        stub.released.set()
        resumed, _ = flowkit.run_flow(config)

    assert list_versions(releases, "deflectionbench") == ["1.0.0"] and _half_written(releases) == []
    (stage_i,) = flowkit.calls(resumed, "I", "parametric")
    assert stage_i["cache_hits"] == ADMIT  # every call finished before the kill was reused
    assert stage_i["calls"] == total_i - ADMIT and stage_i["failures"] == 0  # and none repeated
    (stage_iii,) = flowkit.calls(resumed, "III", "total")
    assert stage_iii["calls"] == base_iii["calls"] + base_iii["cache_hits"]
    expected, got = flowkit.fingerprint(base_release), flowkit.fingerprint(resumed)
    assert got["sample_ids"] == expected["sample_ids"] and got["sample_ids"]
    assert got["shards"] == expected["shards"]
    assert got["verdicts"] == expected["verdicts"]
