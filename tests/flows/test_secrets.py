"""An API key set in the environment reaches the model server and nothing else: not the
logs (captured in-process and read back from the Prefect API), not the Prefect artifacts,
not a byte of the release or of the workdir (response cache, ingest outputs, indexes).

Shares its flow run (and rerun) with test_faults.py: the model is an ``openai``-backend
spec whose ``api_key_env`` names a random ``sk-test-...`` key, and one request hits a
server that echoes the credential back in its error body, which must be scrubbed.
"""

from __future__ import annotations

import json

import pytest

from tests.flows import flowkit

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory, fixtures_root, prefect_harness) -> flowkit.FaultRun:
    return flowkit.fault_run(tmp_path_factory, fixtures_root)


def test_key_was_sent_to_the_server(run):
    assert run.key.startswith("sk-test-") and run.authorizations == {f"Bearer {run.key}"}


def test_key_is_in_no_log(run):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogHandler

    assert run.logs and not [line for line in run.logs if run.key in line]
    APILogHandler().flush()
    with get_client(sync_client=True) as client:
        logs = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=run.flow_runs)))
    assert logs
    assert not [log.message for log in logs if run.key in log.message]


def test_key_is_in_no_artifact(run):
    from prefect.client.orchestration import get_client

    artifacts = []
    with get_client(sync_client=True) as client:  # every page: the session's API holds every test's artifacts
        while page := client.read_artifacts(limit=200, offset=len(artifacts)):
            artifacts += page
    assert {a.key for a in artifacts} >= {"parametric-calls", "deflectionbench-release"}
    leaked = [a.key for a in artifacts if run.key in json.dumps(a.model_dump(mode="json"))]
    assert leaked == []


def test_key_is_in_no_file(run):
    needle = run.key.encode()
    files = [p for folder in (run.release, run.home) for p in folder.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"manifest.json", "ledger.parquet", "responses.sqlite", "config.yaml"} <= names
    assert any(p.parent.name == "ingest" or "ingest" in p.parts for p in files)
    assert [str(p) for p in files if needle in p.read_bytes()] == []
    # the server echoed the key in its error; the ledger kept the scrubbed text
    assert _ledger_mentions(run, "Bearer ***")


def _ledger_mentions(run: flowkit.FaultRun, text: str) -> bool:
    from mmcurate.releases.reader import open_release

    return any(text in (d or "") for d in open_release(run.release).ledger.column("detail").to_pylist())
