"""The temporary Prefect API that one command-line run owns.

Without ``PREFECT_API_URL``, Prefect starts an ephemeral API server as a child in the
caller's process group: a terminal's Ctrl-C stops it at the moment the flow needs it to
record its end, and a SIGTERM or SIGKILL of the caller leaves it running. mmcurate starts its
own instead (``temporary_api``):

- in its own session (process group), so Ctrl-C reaches only the command, which reports
  the flow's end, drains Prefect's log and event workers, then stops the server;
- watching its parent (``core.lifeline``): if the command dies, even by SIGKILL, the
  server stops itself;
- registered under ``<tmp>/mmcurate-<uid>/``, so a later command stops a registered server
  whose owner is gone, whatever happened to it (processes are looked up with psutil, so
  this works on macOS as on Linux).

Nothing is started when a Prefect API is configured already (a server, Prefect Cloud, the
test harness). The server itself runs as ``python -m mmcurate.tasks.prefect_api PORT``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import uvicorn
from prefect.events.worker import EventsWorker
from prefect.logging.handlers import APILogWorker
from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

from mmcurate.core.errors import MmcurateError
from mmcurate.core.lifeline import child_environment, exit_with_parent

MODULE = "mmcurate.tasks.prefect_api"
STOP_TIMEOUT = 10.0


def registry() -> Path:
    """Where running servers are recorded, one JSON file per owning command."""
    return Path(tempfile.gettempdir()) / f"mmcurate-{os.getuid()}"


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie is not; one of another user is)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def _is_ours(pid: int) -> bool:
    """Whether ``pid`` runs this module's server (a recycled pid must not be killed)."""
    try:
        return MODULE in " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False


def _stop_group(pid: int) -> None:
    """SIGTERM the server's process group; SIGKILL it if it has not gone within STOP_TIMEOUT."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + STOP_TIMEOUT
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def reap_stale(folder: Path | None = None) -> list[int]:
    """Stop every registered server whose owning command is gone; return their pids."""
    folder = folder or registry()
    reaped = []
    for entry in sorted(folder.glob("prefect-api-*.json")) if folder.is_dir() else []:
        try:
            record = json.loads(entry.read_text())
            owner, server = int(record["owner"]), int(record["server"])
        except (OSError, ValueError, KeyError, TypeError):
            entry.unlink(missing_ok=True)
            continue
        if _alive(owner):
            continue
        if _alive(server) and _is_ours(server):
            _stop_group(server)
            reaped.append(server)
        entry.unlink(missing_ok=True)
    return reaped


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class ApiServer:
    process: subprocess.Popen
    url: str  # .../api
    record: Path  # the registry entry
    log: Path  # the server's output

    def stop(self) -> None:
        if self.process.poll() is None:
            _stop_group(self.process.pid)
            self.process.wait()
        self.record.unlink(missing_ok=True)
        self.log.unlink(missing_ok=True)


def start_server(folder: Path | None = None, attempts: int = 3) -> ApiServer:
    """Start the server in its own session, wait until it answers, and register it."""
    folder = folder or registry()
    folder.mkdir(parents=True, exist_ok=True)
    timeout = float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180"))
    env = {
        **child_environment(),
        "PREFECT_UI_ENABLED": "0",
        "PREFECT__SERVER_EPHEMERAL": "1",
        "PREFECT__SERVER_FINAL": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    last = "no output"
    for _ in range(attempts):  # a port taken between choosing and binding it: try another
        port = _free_port()
        log = folder / f"prefect-api-{os.getpid()}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", MODULE, str(port)],
                env=env,
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        record = folder / f"prefect-api-{os.getpid()}.json"
        record.write_text(json.dumps({"owner": os.getpid(), "server": process.pid, "port": port}))
        server = ApiServer(process, f"http://127.0.0.1:{port}/api", record, log)
        deadline = time.monotonic() + timeout
        while process.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(f"{server.url}/health", timeout=2.0).status_code == 200:
                    return server
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        last = (log.read_text(errors="replace").strip().splitlines() or [last])[-1]
        server.stop()
        if time.monotonic() >= deadline:
            last = f"no answer within {timeout:.0f}s"
            break
    raise MmcurateError(
        f"the temporary Prefect API did not start ({last}); set PREFECT_API_URL to a running Prefect server"
    )


def _drain_prefect_workers() -> None:
    """Send Prefect's buffered logs and events before the API goes away."""
    APILogWorker.drain_all(timeout=STOP_TIMEOUT)
    EventsWorker.drain_all(timeout=STOP_TIMEOUT)


@contextmanager
def temporary_api() -> Iterator[ApiServer | None]:
    """Use the configured Prefect API, or start one owned by this process (module docstring).
    Prefect's buffered logs and events are sent before the block ends. On an interrupt the
    caller stops the server itself (``ApiServer.stop``) and exits."""
    reap_stale()
    if get_current_settings().api.url:
        try:
            yield None
        finally:
            _drain_prefect_workers()
        return
    server = start_server()
    os.environ["PREFECT_API_URL"] = server.url  # for processes the run starts (Dask workers)
    try:
        with temporary_settings(updates={PREFECT_API_URL: server.url}):
            try:
                yield server
            finally:
                _drain_prefect_workers()
    finally:
        os.environ.pop("PREFECT_API_URL", None)
        server.stop()


def serve(port: int) -> None:
    """Run Prefect's API app on 127.0.0.1:``port`` until SIGTERM (or the parent's death)."""
    exit_with_parent()
    uvicorn.run(
        "prefect.server.api.server:create_app",
        factory=True,
        host="127.0.0.1",
        port=port,
        log_level="error",
        lifespan="on",
    )


if __name__ == "__main__":
    serve(int(sys.argv[1]))
