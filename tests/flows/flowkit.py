"""Helpers shared by the flow-level scale and fault tests: a small DeflectionBench config,
release fingerprints, and a fault-injecting proxy in front of a real llama.cpp server.

The config is the one of ``test_deflectionbench_flow.py`` with two samples per source
instead of three (two fixture sources, small negatives, ``k_min`` 2), so one run costs
about fifteen model calls: these tests run the flow five times.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import yaml

from mmcurate.releases.reader import DATA_DIR, open_release

EMBEDDED = {"backend": "embedded", "gguf": "smollm2", "revision": "q4_1", "max_tokens": 12, "concurrency": 2}
REPO = Path(__file__).resolve().parents[2]
DRYRUN = REPO / "configs" / "dryrun"
# the dry run's scripted models (configs/dryrun.yaml): deterministic answers, no server
READER = {"backend": "scripted", "script": str(DRYRUN / "vlm-reader.jsonl"), "default": "Atlantis",
          "revision": "dryrun-1", "vision": True}
GUESSER = {"backend": "scripted", "script": str(DRYRUN / "llm-guesser.jsonl"), "default": "Zanzibar",
           "revision": "dryrun-1"}


def scripted_config(home: Path, fixtures: Path, *, models: dict[str, dict[str, Any]] | None = None,
                    pool: list[str] | None = None, name: str = "config.yaml", **fields: Any) -> Path:
    """A DeflectionBench config over the WebQA and MMDocRAG fixtures (source-provided negatives,
    no mining) gated by the dry run's scripted reader: it releases four samples."""
    models = models or {"vlm-reader": READER}
    data: dict[str, Any] = {
        "workdir": "work",
        "releases_root": "releases",
        "models": models,
        "judge": {"kind": "lexical"},
        "deflectionbench": {
            "sources": [{"name": "webqa", "root": str(fixtures / "webqa")},
                        {"name": "mmdocrag", "root": str(fixtures / "mmdocrag")}],
            "gating": {"pool": pool or list(models)},
            "retrieval": {"kb": str(fixtures / "kb" / "kb.jsonl"), "max_text_negatives": 5},
            "k_min": 3,
            "seed": 13,
            "version": "1.0.0",
        },
        **fields,
    }
    home.mkdir(parents=True, exist_ok=True)
    path = home / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def write_config(
    home: Path,
    fixtures: Path,
    *,
    models: dict[str, dict[str, Any]] | None = None,
    pool: list[str] | None = None,
    workdir: Path | str = "work",
    releases_root: Path | str = "releases",
    task_runner: dict[str, Any] | None = None,
    name: str = "config.yaml",
    limit: int = 2,
) -> Path:
    """Write the small two-source config under ``home``; return its path."""
    models = models or {"smollm2": dict(EMBEDDED)}
    data: dict[str, Any] = {
        "workdir": str(workdir),
        "releases_root": str(releases_root),
        "models": models,
        "judge": {"kind": "lexical"},
        "deflectionbench": {
            "sources": [
                {"name": "infoseek", "root": str(fixtures / "infoseek"), "limit": limit},
                {"name": "webqa", "root": str(fixtures / "webqa"), "limit": limit},
            ],
            "gating": {"pool": pool or list(models)},
            "retrieval": {"kb": str(fixtures / "kb" / "kb.jsonl"), "top_pages": 3, "top_images": 2,
                          "max_text_negatives": 3},
            "k_min": 2,
            "seed": 5,
            "version": "1.0.0",
        },
    }
    if task_runner:
        data["task_runner"] = task_runner
    home.mkdir(parents=True, exist_ok=True)
    path = home / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def fingerprint(path: Path) -> dict[str, Any]:
    """What two runs of the same config must agree on: sample ids, the sha256 of every data
    shard, and the ledger verdict per (sample_id, check, model, context_id)."""
    release = open_release(path)
    shards = {rel: entry["sha256"] for rel, entry in release.manifest["files"].items()
              if rel.startswith(f"{DATA_DIR}/")}
    verdicts = Counter(
        (r["sample_id"], r["check"], r["model"], r["context_id"], r["verdict"])
        for r in release.ledger.select(["sample_id", "check", "model", "context_id", "verdict"]).to_pylist()
    )
    return {"sample_ids": release.sample_ids, "shards": shards, "verdicts": verdicts}


def calls(path: Path, stage: str, step: str | None = None) -> list[dict]:
    """The release's ``statistics.calls`` rows of one stage (``I``/``III``), optionally one step."""
    rows = json.loads((path / "manifest.json").read_text())["statistics"]["calls"]
    return [r for r in rows if r["stage"] == stage and (step is None or r["step"] == step)]


# ---------------------------------------------------------------- shared runs

_RUNS: dict[str, Any] = {}  # one run of each kind per test session, shared by the test files


def run_flow(config: Path, task_runner: Any = None, version: str | None = None) -> tuple[Path, Any]:
    """Run the DeflectionBench flow in-process (needs the Prefect harness); (release, flow run id)."""
    from mmcurate.flows.deflectionbench import deflectionbench

    flow = deflectionbench.with_options(task_runner=task_runner) if task_runner is not None else deflectionbench
    state = flow(config=str(config), version=version, return_state=True)
    return Path(state.result()), state.state_details.flow_run_id


def baseline(tmp_path_factory: Any, fixtures: Path) -> tuple[Path, Path]:
    """One uninterrupted run on the default thread runner from a fresh workdir: (home, release)."""
    if "baseline" not in _RUNS:
        home = tmp_path_factory.mktemp("baseline")
        release, _ = run_flow(write_config(home, fixtures))
        _RUNS["baseline"] = (home, release)
    return _RUNS["baseline"]


def cache_path(home: Path) -> Path:
    return home / "work" / "responses.sqlite"


def copy_cache(source: Path, target: Path, *, keep: str) -> int:
    """Copy the rows of ``source`` whose ``template`` satisfies the SQL condition ``keep``
    into a new cache at ``target``; return how many were copied."""
    import sqlite3

    from mmcurate.gating.cache import ResponseCache

    ResponseCache(target).close()  # creates the file with the schema, in WAL mode
    db = sqlite3.connect(str(target), isolation_level=None)
    try:
        db.execute("ATTACH DATABASE ? AS src", (str(source),))
        db.execute(f"INSERT INTO responses SELECT * FROM src.responses WHERE {keep}")
        db.execute("DETACH DATABASE src")
        return db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    finally:
        db.close()


def forget(cache: Path, where: str) -> int:
    """Delete the cached answers matching the SQL condition ``where``; return how many."""
    import sqlite3

    db = sqlite3.connect(str(cache), isolation_level=None, timeout=60)
    try:
        return db.execute(f"DELETE FROM responses WHERE {where}").rowcount
    finally:
        db.close()


# ---------------------------------------------------------------- fault-injecting proxy

# fault -> the attempts (1-based) on which a request misbehaves; "always" fails every attempt
FAULT_ATTEMPTS: dict[str, tuple[int, ...]] = {
    "5xx": (1, 2), "429": (1,), "reset": (1,), "hang": (1,), "malformed": (1,), "empty": (1,),
}
FAULT_PLAN = ["always", "5xx", "429", "reset", "hang", "malformed", "empty"]


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "FaultProxy"

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")  # a faulted socket never serves a retry
        self.close_connection = True
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(200, b'{"object": "list", "data": []}')

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        body = json.loads(raw)
        ident = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()[:16]
        fault, attempt = self.server.record(ident, self.headers.get("Authorization"))
        if fault == "always":  # a server that echoes the credential in its error
            return self._send(500, json.dumps({"error": f"broken for {self.headers.get('Authorization')}"}).encode())
        if attempt in FAULT_ATTEMPTS.get(fault, ()):
            if fault == "5xx":
                return self._send(502 if attempt == 1 else 503, b'{"error": "upstream unavailable"}')
            if fault == "429":
                return self._send(429, b'{"error": "slow down"}', {"Retry-After": "1"})
            if fault == "reset":
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                self.connection.close()
                return
            if fault == "hang":
                time.sleep(self.server.hang)
                self.close_connection = True
                return
            if fault == "malformed":
                return self._send(200, b'{"choices": [{"message": ')
            if fault == "empty":
                return self._send(200, b"")
        # good request: forward to the real server, without the credential
        try:
            reply = httpx.post(f"{self.server.upstream}/chat/completions", content=raw,
                               headers={"Content-Type": "application/json"}, timeout=600)
        except httpx.HTTPError as exc:  # the real server's own hiccup: counted, passed on as a 502
            self.server.upstream_failed(ident, repr(exc))
            return self._send(502, b'{"error": "upstream failed"}')
        if reply.status_code != 200:
            self.server.upstream_failed(ident, f"HTTP {reply.status_code}: {reply.text[:200]}")
        self._send(reply.status_code, reply.content)


class FaultProxy(ThreadingHTTPServer):
    """OpenAI-compatible proxy on 127.0.0.1 in front of a real server. Each distinct request
    (by its messages) gets the next fault of ``plan`` when first seen, then "ok"; attempts
    are counted per request and every Authorization header is kept for inspection."""

    daemon_threads = True

    def __init__(self, upstream: str, plan: list[str], hang: float) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.base_url = f"http://127.0.0.1:{self.server_address[1]}/v1"
        self.upstream = upstream.rstrip("/")
        self.plan = list(plan)
        self.hang = hang
        self.lock = threading.Lock()
        self.faults: dict[str, str] = {}
        self.attempts: Counter[str] = Counter()
        self.authorizations: set[str | None] = set()
        self.upstream_failures: dict[str, list[str]] = {}  # not injected: the real server failed
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    def record(self, ident: str, authorization: str | None) -> tuple[str, int]:
        with self.lock:
            if ident not in self.faults:
                self.faults[ident] = self.plan.pop(0) if self.plan else "ok"
            self.attempts[ident] += 1
            self.authorizations.add(authorization)
            return self.faults[ident], self.attempts[ident]

    def upstream_failed(self, ident: str, error: str) -> None:
        with self.lock:
            self.upstream_failures.setdefault(ident, []).append(error)

    def snapshot(self) -> Counter[str]:
        with self.lock:
            return Counter(self.attempts)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that gave up (timeouts) close their end

    def __enter__(self) -> "FaultProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


@dataclass
class FaultRun:
    """One flow run through the fault proxy with an API key set, and its rerun."""

    home: Path
    release: Path
    key: str
    model: str
    max_retries: int
    faults: dict[str, str]  # request -> fault
    first: Counter  # attempts per request during the first run
    second: Counter  # attempts per request during the rerun
    authorizations: set
    upstream_failures: dict  # request -> failures of the real server behind the proxy
    flow_runs: list
    logs: list[str]  # every log record emitted in this process during both runs
    cache_rows: tuple[int, int]  # response-cache rows after the first run, after the rerun


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string still shows its parts
            text = f"{record.msg!r} {record.args!r}"
        if record.exc_info:
            text += "\n" + logging.Formatter().formatException(record.exc_info)
        self.lines.append(f"{record.name} {record.levelname} {text}")


LOGGERS = ("", "prefect", "prefect.flow_runs", "prefect.task_runs", "mmcurate")


def fault_run(tmp_path_factory: Any, fixtures: Path) -> FaultRun:
    """Run the small config once with its model behind the fault proxy, then rerun it."""
    if "faults" in _RUNS:
        return _RUNS["faults"]
    from mmcurate.gating.backends.embedded import LlamaServer, find_gguf
    from mmcurate.gating.cache import ResponseCache

    home = tmp_path_factory.mktemp("faults")
    key = f"sk-test-{secrets.token_hex(16)}"
    timeout, retries = 30.0, 3
    collect = _Collect()
    loggers = [logging.getLogger(name) for name in LOGGERS]
    levels = [lg.level for lg in loggers]
    os.environ["MMCURATE_TEST_KEY"] = key
    server = LlamaServer(find_gguf("smollm2"), n_ctx=2048, alias="smollm2")
    try:
        with FaultProxy(server.base_url, FAULT_PLAN, hang=timeout + 2) as proxy:
            # concurrency 1: the real server answers one request at a time, so a request's
            # time is its own and only the injected hang reaches the timeout
            spec = {"backend": "openai", "model": "smollm2", "base_url": proxy.base_url, "revision": "q4_1",
                    "api_key_env": "MMCURATE_TEST_KEY", "max_tokens": 12, "concurrency": 1,
                    "timeout": timeout, "max_retries": retries}
            config = write_config(home, fixtures, models={"proxied": spec})
            for lg in loggers:
                lg.addHandler(collect)
                lg.setLevel(logging.DEBUG)
            try:
                release, first_id = run_flow(config)
                first = proxy.snapshot()
                with ResponseCache.open(f"sqlite:///{cache_path(home)}") as cache:
                    rows_first = cache.count()
                again, second_id = run_flow(config)
                with ResponseCache.open(f"sqlite:///{cache_path(home)}") as cache:
                    rows_second = cache.count()
            finally:
                for lg, level in zip(loggers, levels):
                    lg.removeHandler(collect)
                    lg.setLevel(level)
            assert server.running, f"the real llama.cpp server died during the runs:\n{server.log_tail(40)}"
            assert again == release
            second = proxy.snapshot() - first
            _RUNS["faults"] = FaultRun(
                home, release, key, "proxied", retries, dict(proxy.faults), first, second,
                set(proxy.authorizations), dict(proxy.upstream_failures), [first_id, second_id], collect.lines, (rows_first, rows_second))
    finally:
        server.stop()
        os.environ.pop("MMCURATE_TEST_KEY", None)
    return _RUNS["faults"]
