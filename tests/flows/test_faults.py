"""The flow survives a misbehaving model server.

A deterministic stub server (tests/flows/flowkit.py) answers as the dry run's scripted reader
and misbehaves on purpose: the first distinct requests get, in arrival order, a request that
always fails (HTTP 500 echoing the credential), a 502/503 burst, a 429 with Retry-After, a
connection reset, no answer at all (the client times out), a malformed and an empty 200 body;
everything else is answered at once. The model is an ``openai``-backend spec aimed at it
(timeout 10 s, max_retries 3, one request at a time, so the faults always hit the same
requests). The always-failing request holds its sample out, so the runs allow an incomplete
release. One run plus its rerun is shared with test_secrets.py.
"""

from __future__ import annotations

import json
from collections import Counter

import polars as pl
import pytest

from mmcurate.releases.reader import open_release
from mmcurate.releases.verify import verify_release
from tests.flows import flowkit

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory, fixtures_root, prefect_harness) -> flowkit.FaultRun:
    return flowkit.fault_run(tmp_path_factory, fixtures_root)


def _injected(run: flowkit.FaultRun) -> dict[str, str]:
    """fault -> the request it was injected into"""
    return {fault: ident for ident, fault in run.faults.items() if fault != "ok"}


def test_every_fault_is_retried_exactly_as_planned(run):
    injected = _injected(run)
    assert set(injected) == set(flowkit.FAULT_PLAN)
    assert run.first[injected["always"]] == run.max_retries + 1
    for fault, ident in injected.items():
        if fault != "always":  # its misbehaving attempts, then the one that succeeded
            assert run.first[ident] == len(flowkit.FAULT_ATTEMPTS[fault]) + 1, fault
    healthy = [ident for ident, fault in run.faults.items() if fault == "ok"]
    assert healthy and all(run.first[ident] == 1 for ident in healthy)


def test_release_is_written_and_the_hopeless_request_is_an_error_not_a_grade(run):
    assert verify_release(run.release).ok
    release = open_release(run.release)
    assert release.sample_ids  # a non-empty release
    rows = flowkit.calls(run.release, "I", "parametric")
    assert [(r["model"], r["failures"]) for r in rows] == [(run.model, 1)]
    (stage_iii,) = flowkit.calls(run.release, "III", "total")
    assert stage_iii["failures"] == 0 and rows[0]["cache_hits"] == 0
    assert rows[0]["calls"] + stage_iii["calls"] == len(run.faults)  # each call reached the server
    failed = release.manifest.incomplete["failed_calls"][run.model]
    assert release.manifest.incomplete["held_out"] == 1 and list(release.manifest.incomplete["failed_calls"]) == [
        run.model
    ]
    assert (failed["failed"], failed["calls"]) == (1, rows[0]["calls"] + stage_iii["calls"])
    assert failed["first_error"].startswith("HTTP 500") and "***" in failed["first_error"]  # why, with the key hidden

    ledger = pl.from_arrow(release.ledger)
    errors = ledger.filter(pl.col("verdict") == "error")
    assert sorted(errors["check"].to_list()) == ["gate.answer", "gate.verdict"]
    (sample,) = set(errors["sample_id"].to_list())
    answer = errors.filter(pl.col("check") == "gate.answer").row(0, named=True)
    assert answer["model"] == run.model
    detail = json.loads(answer["detail"]) if isinstance(answer["detail"], str) else answer["detail"]
    assert detail["answer"] is None
    assert "HTTP 500" in detail["error"] and f"{run.max_retries + 1} attempts" in detail["error"]
    # no grade for that sample from that model, and it is not released
    graded = ledger.filter((pl.col("sample_id") == sample) & (pl.col("check") == "gate.answer"))
    assert graded["verdict"].to_list() == ["error"]
    assert sample not in release.sample_ids
    # every other request was answered: no other failure anywhere in the ledger
    assert Counter(ledger["verdict"].to_list())["error"] == 2


def test_rerun_sends_only_the_failed_request_again(run):
    always = _injected(run)["always"]
    assert run.second == Counter({always: run.max_retries + 1})  # failures are not cached
    assert run.cache_rows[0] == run.cache_rows[1] == len(run.faults) - 1  # successes are
