"""The DeflectionBench curation streamed shard by shard (issue 36 item 2).

At ``deflectionbench.shard_size: 7`` the fixture's samples go through Stages I-III seven at a
time, each stage's kept rows spilled to Parquet under the run folder; the release is the one
the default shard size (every sample in one shard) gives: the same rows byte for byte, the same
ledger verdicts, the same statistics. A kill -9 in the middle of a later shard, after a finished
one, then a rerun: no finished model call is made again and the release is still that one.
No timing window: the stub model holds a request after ``ADMIT`` answers (tests/flows/flowkit.py).
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import yaml

from tests.flows import flowkit
from tests.flows.release_fingerprint import content_fingerprint

pytestmark = pytest.mark.slow
ADMIT = 5


def _sharded(config: Path, rows: int) -> Path:
    data = yaml.safe_load(config.read_text())
    data["deflectionbench"]["shard_size"] = rows
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    return config


def _manifest(release: Path) -> dict:
    return json.loads((release / "manifest.json").read_text())


def _kept_parts(home: Path, stage: str) -> list[Path]:
    return sorted((home / "work" / "runs").glob(f"*/kept/{stage}-*.parquet"))


def test_shards_of_seven_give_the_release_of_one_shard(tmp_path, fixtures_root, tmp_path_factory, prefect_harness):
    _, whole = flowkit.baseline(tmp_path_factory, fixtures_root)
    streamed, _ = flowkit.run_flow(_sharded(flowkit.scripted_config(tmp_path, fixtures_root), 7))

    entered = _manifest(streamed)["counts"]["per_stage"]["ingested"]
    assert entered > 14 and len(_kept_parts(tmp_path, "parametric")) == -(-entered // 7)  # three shards or more
    assert flowkit.fingerprint(streamed) == flowkit.fingerprint(whole)  # data shards byte for byte, verdicts
    assert content_fingerprint(streamed) == content_fingerprint(whole)
    ours, theirs = _manifest(streamed), _manifest(whole)
    assert ours["statistics"] == theirs["statistics"]
    assert {k: v for k, v in ours["counts"].items() if k != "run_id"} == {
        k: v for k, v in theirs["counts"].items() if k != "run_id"
    }


def test_kill9_mid_shard_then_resume_repeats_no_finished_call(
    tmp_path, fixtures_root, tmp_path_factory, prefect_harness
):
    _, base_release = flowkit.baseline(tmp_path_factory, fixtures_root)
    (base_i,) = flowkit.calls(base_release, "I", "parametric")
    total_i = base_i["calls"] + base_i["cache_hits"]
    assert total_i > ADMIT + 1
    with flowkit.StubModel(flowkit.DRYRUN / "vlm-reader.jsonl", flowkit.READER["default"], admit=ADMIT) as stub:
        # one Stage I request per sample: shards of 3 finish the first shard, then hold the third
        # request of the second
        config = _sharded(
            flowkit.scripted_config(tmp_path, fixtures_root, models={"vlm-reader": flowkit.stub_spec(stub)}), 3
        )
        assert flowkit.kill9_after_admitted(config, tmp_path, stub, ADMIT) == -signal.SIGKILL
        crashed = _kept_parts(tmp_path, "parametric")
        assert [p.name for p in crashed] == ["parametric-00000.parquet"]  # the first shard was finished and spilled

        stub.admit_left = None
        stub.released.set()
        resumed, _ = flowkit.run_flow(config)

    (stage_i,) = flowkit.calls(resumed, "I", "parametric")
    assert stage_i["cache_hits"] == ADMIT  # the finished shard's calls and the second's first two: reused
    assert stage_i["calls"] == total_i - ADMIT and stage_i["failures"] == 0  # none repeated
    expected, got = flowkit.fingerprint(base_release), flowkit.fingerprint(resumed)
    assert got["sample_ids"] == expected["sample_ids"] and got["sample_ids"]
    assert got["shards"] == expected["shards"] and got["verdicts"] == expected["verdicts"]
