"""A run whose model calls failed is not published as if complete.

Scripted models and a model server that refuses every connection (no timing): a release
whose samples were held out by errors is refused with one line naming the model and its
failures, unless ``allow_incomplete``, which then says so at the top of its card; a run that
leaves no sample is never published; an evaluation against a dead model fails with its count.
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from mmcurate.core.errors import MmcurateError
from mmcurate.releases.errors import ReleaseIncomplete
from mmcurate.releases.reader import list_versions, open_release
from tests.flows import flowkit

pytestmark = pytest.mark.slow


def closed_port() -> int:
    """A loopback port nothing listens on: every connection is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def dead_model() -> dict:
    return {
        "backend": "openai",
        "model": "dead",
        "base_url": f"http://127.0.0.1:{closed_port()}/v1",
        "max_retries": 0,
        "timeout": 5,
    }


@pytest.fixture
def flaky(tmp_path) -> dict:
    """Answers every question wrongly, but its call fails for the question about Chelsea."""
    script = tmp_path / "flaky.jsonl"
    script.write_text(json.dumps({"when_none": ["Chelsea"], "answer": "Atlantis"}) + "\n")
    return {"backend": "scripted", "script": str(script), "revision": "flaky-1"}


def test_held_out_samples_refuse_the_release_unless_allowed(tmp_path, fixtures_root, flaky, prefect_harness):
    from mmcurate.flows.deflectionbench.curate import deflectionbench

    config = flowkit.scripted_config(tmp_path, fixtures_root, models={"vlm-reader": flowkit.READER, "flaky": flaky})
    with pytest.raises(ReleaseIncomplete) as refused:
        deflectionbench(config=str(config))
    message = str(refused.value)
    assert "\n" not in message and "refusing to publish deflectionbench 1.0.0 as complete" in message
    failed = re.search(
        r"model 'flaky' failed (\d+) of \d+ calls \(first error: .+?\); (\d+) samples? held out "
        r"by errors",
        message,
    )
    assert failed and int(failed[1]) >= 1 and int(failed[2]) >= 1
    assert "rerun the same command to resume" in message and "--allow-incomplete" in message
    assert list_versions(tmp_path / "releases", "deflectionbench") == []

    release = Path(deflectionbench(config=str(config), allow_incomplete=True))
    manifest = open_release(release).manifest
    assert manifest.incomplete["held_out"] == int(failed[2])
    assert manifest.incomplete["failed_calls"]["flaky"]["failed"] == int(failed[1])
    assert open_release(release).sample_ids
    card = (release / "README.md").read_text()
    assert card.index("Incomplete release") < card.index("## Statistics")


def test_an_unreachable_model_never_publishes_zero_rows(tmp_path, fixtures_root, prefect_harness):
    from mmcurate.flows.deflectionbench.curate import deflectionbench

    config = flowkit.scripted_config(tmp_path, fixtures_root, models={"dead": dead_model()})
    for allow in (False, True):
        with pytest.raises(ReleaseIncomplete) as refused:
            deflectionbench(config=str(config), allow_incomplete=allow)
        message = str(refused.value)
        assert "no sample remains" in message and re.search(
            r"model 'dead' failed (\d+) of \1 calls \(first error: ", message
        )
    assert list_versions(tmp_path / "releases", "deflectionbench") == []


def test_an_always_abstaining_model_leaves_its_ledger_and_says_where(tmp_path, fixtures_root, prefect_harness):
    """Issue 42 item 15: a gating model that abstains on everything removes every sample; the
    refusal is the only output, so the ledger that explains it is written and the line names it."""
    import pyarrow.parquet as pq

    from mmcurate.flows.deflectionbench.curate import deflectionbench

    script = tmp_path / "abstainer.jsonl"
    script.write_text("")
    abstainer = {
        "backend": "scripted",
        "script": str(script),
        "default": "I don't know",
        "revision": "abstain-1",
        "vision": True,
    }
    config = flowkit.scripted_config(tmp_path, fixtures_root, models={"abstainer": abstainer})
    with pytest.raises(ReleaseIncomplete) as refused:
        deflectionbench(config=str(config))
    message = str(refused.value)
    ledger = tmp_path / "work" / "refused" / "deflectionbench-1.0.0" / "ledger.parquet"
    assert "\n" not in message and "no sample remains: every sample was removed; the ledger of the run (" in message
    assert message.endswith(f"decisions) is at {ledger}")
    decisions = pq.read_table(ledger).to_pylist()
    assert decisions and {d["model"] for d in decisions} >= {"abstainer"}
    assert list_versions(tmp_path / "releases", "deflectionbench") == []


def test_evaluating_a_dead_model_fails_with_the_count(tmp_path, fixtures_root, prefect_harness):
    from mmcurate.flows.deflectionbench.curate import deflectionbench
    from mmcurate.flows.evaluate import evaluate_release

    config = flowkit.scripted_config(
        tmp_path, fixtures_root, models={"vlm-reader": flowkit.READER, "dead": dead_model()}, pool=["vlm-reader"]
    )
    release = Path(deflectionbench(config=str(config)))
    n = len(open_release(release).sample_ids)
    with pytest.raises(MmcurateError) as failed:
        evaluate_release(release=str(release), model="dead", config=str(config), options={"scenarios": ["oracle"]})
    assert str(failed.value).startswith(
        f"every answer call failed: model 'dead' failed {n} of {n} calls (first error: "
    )
    assert not (tmp_path / "work" / "evaluations").exists()
