"""prefect.yaml against a real Prefect server: deploy everything, run the dry run on a worker.

A local `prefect server` (own PREFECT_HOME, loopback port) gets the process work pool;
`prefect deploy --all` runs from the checkout; the deployments, their pull step and the
watch schedule are read back from the server's REST API. Then the scripted dry run is
triggered and a one-shot process worker, started outside the checkout with a temporary
workdir and releases root, must run it to Completed and publish a non-empty release.

Nothing is timed: the test waits for events (the server answers its health check, the
one-shot worker exits after its run) and then checks states. HANG_GUARD only stops a wait
that would otherwise never end; a slow machine never reaches it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
POOL = "mmcurate-process"
EXPECTED = {  # (flow name, deployment name) -> entrypoint
    ("deflectionbench", "deflectionbench"): "flows/deflectionbench/curate.py:deflectionbench",
    ("deflectionbench", "dryrun"): "flows/deflectionbench/curate.py:deflectionbench",
    ("reflvqa", "reflvqa"): "flows/reflvqa/curate.py:reflvqa",
    ("reflectv", "reflectv"): "flows/reflectv/curate.py:reflectv",
    ("pope", "pope"): "flows/pope/curate.py:pope",
    ("recurate-release", "recurate"): "flows/recurate.py:recurate_release",
    ("watch", "watch"): "flows/watch.py:watch",
    ("evaluate", "evaluate"): "flows/evaluate.py:evaluate_release",
}
HANG_GUARD = 1800  # seconds: a wait this long means something hangs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3 * HANG_GUARD)]


def _prefect() -> str:
    exe = Path(sys.executable).with_name("prefect")
    return str(exe) if exe.exists() else "prefect"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    """Terminate the process group we started (the process and its children), then kill."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


class Server:
    def __init__(self, api: str, env: dict[str, str], logs: Path) -> None:
        self.api, self.env, self.logs = api, env, logs

    def cli(self, *args: str, cwd: Path = REPO, timeout: float = HANG_GUARD) -> str:
        done = subprocess.run(
            [_prefect(), *args], cwd=cwd, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"prefect {' '.join(args)} failed ({done.returncode}):\n{output[-4000:]}"
        return output

    def post(self, path: str, body: dict | None = None) -> list | dict:
        response = httpx.post(f"{self.api}{path}", json=body or {}, timeout=30)
        response.raise_for_status()
        return response.json()

    def get(self, path: str) -> dict:
        response = httpx.get(f"{self.api}{path}", timeout=30)
        response.raise_for_status()
        return response.json()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("prefect-home")
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_PROFILES_PATH": str(home / "profiles.toml"),
        "PREFECT_API_URL": api,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_UI_ENABLED": "false",
        "PREFECT_CLI_PROMPT": "false",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    env.pop("PREFECT_PROFILE", None)
    log = home / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [_prefect(), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        while True:  # until it answers (or dies); the module's timeout guards a hang
            assert proc.poll() is None, f"prefect server exited with {proc.returncode}:\n{_tail(log)}"
            try:
                if httpx.get(f"{api}/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        yield Server(api, env, home)
    finally:
        _stop(proc)


@pytest.fixture(scope="module")
def deployed(server: Server) -> dict[tuple[str, str], dict]:
    server.cli("work-pool", "create", POOL, "--type", "process")
    server.cli("--no-prompt", "deploy", "--all")
    flows = {f["id"]: f["name"] for f in server.post("/flows/filter")}
    return {(flows[d["flow_id"]], d["name"]): d for d in server.post("/deployments/filter")}


def test_deploy_all_creates_every_deployment(deployed: dict[tuple[str, str], dict]) -> None:
    assert set(deployed) == set(EXPECTED)
    for key, deployment in deployed.items():
        assert deployment["entrypoint"] == EXPECTED[key]
        assert deployment["work_pool_name"] == POOL
        # the build step recorded the checkout; the pull step makes runs start there
        assert deployment["pull_steps"] == [
            {"prefect.deployments.steps.set_working_directory": {"directory": str(REPO)}}
        ], key
    assert deployed[("deflectionbench", "dryrun")]["parameters"] == {"config": "configs/dryrun.yaml"}
    assert set(deployed[("recurate-release", "recurate")]["parameters"]) == {"release", "add_model", "config"}
    assert deployed[("watch", "watch")]["parameters"]["catalog"] == "configs/catalog.yaml"


def test_watch_schedule_is_monthly_and_inactive(deployed: dict[tuple[str, str], dict]) -> None:
    schedules = deployed[("watch", "watch")]["schedules"]
    assert len(schedules) == 1
    assert schedules[0]["active"] is False
    cron = schedules[0]["schedule"]
    assert cron["timezone"] == "UTC"
    minute, hour, day, month, weekday = cron["cron"].split()
    assert day.isdigit() and month == "*" and weekday == "*", cron  # once a month
    others = [key for key, d in deployed.items() if d["schedules"] and key != ("watch", "watch")]
    assert others == []


def test_dryrun_deployment_runs_on_a_process_worker(server: Server, deployed: dict, tmp_path: Path) -> None:
    output = server.cli("deployment", "run", "deflectionbench/dryrun")
    match = re.search(r"UUID:\s*([0-9a-f-]{36})", output)
    assert match, output
    run_id = match.group(1)

    workdir, releases = tmp_path / "work", tmp_path / "releases"
    env = {**server.env, "MMCURATE_WORKDIR": str(workdir), "MMCURATE_RELEASES_ROOT": str(releases)}
    log = tmp_path / "worker.log"
    outside = tmp_path / "elsewhere"  # not the checkout: the pull step must get the run there
    outside.mkdir()
    with log.open("w") as out:
        worker = subprocess.Popen(
            [_prefect(), "worker", "start", "--pool", POOL, "--run-once", "--limit", "1"],
            cwd=outside,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        worker.wait(timeout=HANG_GUARD)  # --run-once: it exits once the run has ended
    finally:
        _stop(worker)
    state = server.get(f"/flow_runs/{run_id}")["state"]
    assert state and state["type"] == "COMPLETED", f"flow run state {state}; worker log:\n{_tail(log, 80)}"

    release = releases / "deflectionbench" / "1.0.0"
    manifest = json.loads((release / "manifest.json").read_text())
    assert (release / manifest["config"]["workdir"]).resolve() == workdir.resolve()  # paths relative to the release
    rows = sum(pq.read_metadata(p).num_rows for p in (release / "data").glob("test-*.parquet"))
    assert rows > 0
    assert (workdir / "responses.sqlite").exists()


def test_the_documented_deployment_steps_build_the_fixtures_the_dry_run_reads() -> None:
    """Issue 42 item 23: ``deflectionbench/dryrun`` reads tests/fixtures/generated, which only
    ``make fixtures`` writes; the deployment steps (docs/deployments.md) say so before deploying."""
    page = (REPO / "docs" / "deployments.md").read_text(encoding="utf-8")
    section = page.split("# Deployments and schedules", 1)[1].split("\n## ", 1)[0]
    commands = [line.split("#")[0].strip() for line in section.split("```bash", 1)[1].split("```", 1)[0].splitlines()]
    commands = [c for c in commands if c]
    assert commands[0] == "make fixtures" and "deflectionbench/dryrun" in commands[-1]
    dryrun = yaml.safe_load((REPO / "configs" / "dryrun.yaml").read_text())
    assert all("tests/fixtures/generated" in s["root"] for s in dryrun["deflectionbench"]["sources"])
