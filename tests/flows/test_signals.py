"""Ctrl-C, SIGTERM and SIGKILL of ``mmcurate run`` with real signals on real processes.

The command runs on its own (no PREFECT_API_URL), so it starts its own temporary Prefect API
in its own process group (tasks/prefect_api.py). Its model is the deterministic stub server,
which answers two requests and holds the third: the test waits for that request (no timing
window), then signals the command. Ctrl-C and SIGTERM must end it with one line and exit
130 / 143 while the model call is still hanging, and stop the API server; after SIGKILL the
server stops by itself, and a later command stops any server whose owner is gone.

"Within seconds" (docs/commands/run-evaluate.md) is checked without a clock: the command runs
with its grace period (``session.GRACE``, after which it exits regardless) set to an hour, so it can only
end before the hang guard by stopping the held call and the flow at once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mmcurate.tasks.prefect_api import MODULE, _alive, reap_stale
from tests.flows import flowkit

pytestmark = pytest.mark.slow
PATIENCE = 300.0  # seconds: only ever waited in full if something is broken
# ``mmcurate`` with the grace period of an interrupted run far beyond PATIENCE
COMMAND = "import sys; from mmcurate.cli import main, session; session.GRACE = 3600.0; sys.argv[0] = 'mmcurate'; main()"


def _wait(condition, what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def _run_until_held(tmp_path: Path, fixtures: Path, stub: flowkit.StubModel) -> tuple[subprocess.Popen, int, Path]:
    """Start ``mmcurate run`` and wait until its model call hangs; (process, API server pid, registry)."""
    config = flowkit.scripted_config(tmp_path, fixtures, models={"vlm-reader": flowkit.stub_spec(stub, timeout=600)})
    (tmp_path / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(
        TMPDIR=str(tmp_path / "tmp"),
        PREFECT_HOME=str(tmp_path / "prefect"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        HF_HUB_OFFLINE="1",
    )
    child = subprocess.Popen(
        [sys.executable, "-c", COMMAND, "run", "deflectionbench", "--config", str(config)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "stderr.log").open("wb"),
    )
    _wait(lambda: stub.arrived.is_set() or child.poll() is not None, "the held model call")
    assert child.poll() is None, (tmp_path / "stderr.log").read_text()[-3000:]
    registry = tmp_path / "tmp" / f"mmcurate-{os.getuid()}"
    record = json.loads((registry / f"prefect-api-{child.pid}.json").read_text())
    assert _alive(record["server"]) and os.getpgid(record["server"]) == record["server"]  # its own group
    return child, record["server"], registry


@pytest.mark.parametrize(
    "signum, code, said", [(signal.SIGINT, 130, "interrupted (Ctrl-C)"), (signal.SIGTERM, 143, "stopped by SIGTERM")]
)
def test_interrupt_stops_the_run_with_one_line_and_its_api_server(tmp_path, fixtures_root, signum, code, said):
    with flowkit.StubModel(flowkit.DRYRUN / "vlm-reader.jsonl", "Atlantis", admit=2) as stub:
        child, server, registry = _run_until_held(tmp_path, fixtures_root, stub)
        child.send_signal(signum)
        try:
            child.wait(
                timeout=PATIENCE
            )  # the held call never returns and the grace is an hour: only a prompt stop ends it
        finally:
            if child.poll() is None:  # it hung: leave nothing behind
                child.kill()
                child.wait()
    stderr = (tmp_path / "stderr.log").read_text()
    assert child.returncode == code, stderr[-3000:]
    assert stderr.strip().splitlines()[-1] == (
        f"mmcurate: {said}; finished model calls are cached: rerun the same command to resume"
    )
    assert "Traceback" not in stderr
    _wait(lambda: not _alive(server), "the API server to stop")
    assert list(registry.glob("prefect-api-*.json")) == []
    assert not (tmp_path / "releases" / "deflectionbench").exists()


def test_sigkill_leaves_no_api_server_behind(tmp_path, fixtures_root):
    with flowkit.StubModel(flowkit.DRYRUN / "vlm-reader.jsonl", "Atlantis", admit=2) as stub:
        child, server, registry = _run_until_held(tmp_path, fixtures_root, stub)
        child.kill()
        child.wait()
        _wait(lambda: not _alive(server), "the orphaned API server to stop by itself")
    assert reap_stale(registry) == [] and list(registry.glob("prefect-api-*.json")) == []  # the record goes too


def test_a_later_run_stops_a_server_whose_owner_is_gone(tmp_path):
    """A registered server that outlived its owner (say its lifeline could not act) is stopped;
    one whose owner lives, and a recycled pid running something else, are left alone."""
    registry = tmp_path / "registry"
    registry.mkdir()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", MODULE], start_new_session=True)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    try:
        for owner, server in ((gone.pid, stale.pid), (os.getpid(), stale.pid), (gone.pid, other.pid)):
            (registry / f"prefect-api-{owner}-{server}.json").write_text(json.dumps({"owner": owner, "server": server}))
        assert reap_stale(registry) == [stale.pid]
        assert stale.wait(timeout=PATIENCE) == -signal.SIGTERM
        assert other.poll() is None  # not ours: never signalled
        assert [p.name for p in registry.iterdir()] == [f"prefect-api-{os.getpid()}-{stale.pid}.json"]
    finally:
        for process in (stale, other):
            if process.poll() is None:
                process.kill()
                process.wait()
