"""Helpers shared by the flow-level tests: small DeflectionBench, ReflectV and RefLVQA
configs, release fingerprints, and a deterministic OpenAI-compatible model server that can
misbehave on purpose (faults, held requests).

Every model here is deterministic: the dry run's scripted models, or the stub server
answering by the same scripts, so what a test checks never depends on what a small model
happens to answer (the one embedded smoke test is test_deflectionbench_flow.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets
import socket
import sqlite3
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mmcurate.models.backends.scripted import load_rules
from mmcurate.models.cache import ResponseCache
from mmcurate.models.requests import text_of
from mmcurate.releases.reader import DATA_DIR, open_release
from tests.model_servers import HoldingServer, JsonHandler

REPO = Path(__file__).resolve().parents[2]
DRYRUN = REPO / "configs" / "dryrun"
# the dry run's scripted models (configs/dryrun.yaml): deterministic answers, no server
READER = {
    "backend": "scripted",
    "script": str(DRYRUN / "vlm-reader.jsonl"),
    "default": "Atlantis",
    "revision": "dryrun-1",
    "vision": True,
}
GUESSER = {
    "backend": "scripted",
    "script": str(DRYRUN / "llm-guesser.jsonl"),
    "default": "Zanzibar",
    "revision": "dryrun-1",
}


def scripted_config(
    home: Path,
    fixtures: Path,
    *,
    models: dict[str, dict[str, Any]] | None = None,
    pool: list[str] | None = None,
    name: str = "config.yaml",
    **fields: Any,
) -> Path:
    """A DeflectionBench config over the WebQA and MMDocRAG fixtures (source-provided negatives,
    no mining) gated by the dry run's scripted reader: it releases four samples."""
    models = models or {"vlm-reader": READER}
    data: dict[str, Any] = {
        "workdir": "work",
        "releases_root": "releases",
        "models": models,
        "judge": {"kind": "lexical"},
        "deflectionbench": {
            "sources": [
                {"name": "webqa", "root": str(fixtures / "webqa")},
                {"name": "mmdocrag", "root": str(fixtures / "mmdocrag")},
            ],
            "gating": {"pool": pool or list(models)},
            "retrieval": {"kb": str(fixtures / "kb" / "kb.jsonl"), "max_text_negatives": 5},
            "k_min": 3,
            "seed": 13,
            "version": "1.0.0",
        },
        **fields,
    }
    return write_config(home, name, data)


def write_config(home: Path, name: str, data: dict[str, Any]) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


REFLECTV_SOURCES = ("gqa", "textvqa", "docvqa", "chartqa", "fire")


def reflectv_config(
    home: Path,
    fixtures: Path,
    *,
    models: dict[str, dict[str, Any]] | None = None,
    name: str = "config.yaml",
    **fields: Any,
) -> Path:
    """A ReflectV config over the five bundled ReflectV sources, played by the fixture's scripted
    student, teacher, rewriter and verifier (``models`` adds more), boxes grounding, 3 turns."""
    scripts = fixtures / "reflectv_models"
    data: dict[str, Any] = {
        "workdir": "work",
        "releases_root": "releases",
        "models": {
            "student": {"backend": "scripted", "script": str(scripts / "student.jsonl"), "vision": True},
            "teacher": {"backend": "scripted", "script": str(scripts / "teacher.jsonl"), "vision": True},
            "rewriter": {"backend": "scripted", "script": str(scripts / "rewriter.jsonl")},
            "verifier": {
                "backend": "scripted",
                "script": str(scripts / "verifier.jsonl"),
                "default": "yes",
                "vision": True,
            },
            **(models or {}),
        },
        "judge": {"kind": "lexical"},
        "reflectv": {
            "sources": [{"name": source, "root": str(fixtures / source)} for source in REFLECTV_SOURCES],
            "student": "student",
            "teacher": "teacher",
            "rewriter": "rewriter",
            "verifier": "verifier",
            "grounding": f"boxes:{fixtures}",
            "max_turns": 3,
            "seed": 7,
            # the scripted rewriter answers a fixed text per feedback, so it rewrites the bare feedback:
            # the paper's order (caption first, before_rewrite) has its tests in annotation/reflectv
            "caption_order": "after_rewrite",
        },
        **fields,
    }
    return write_config(home, name, data)


def reflvqa_config(
    home: Path,
    fixtures: Path,
    models: dict[str, dict[str, Any]],
    *,
    limit: int = 6,
    reflvqa: dict[str, Any] | None = None,
    name: str = "config.yaml",
    **fields: Any,
) -> Path:
    """A RefLVQA config over ``limit`` bundled Reddit threads and the fixture KB, the model
    ``inspector`` (in ``models``) as the only inspector, lexical grading and entailment, version
    1.0.0; ``reflvqa`` adds or replaces settings of that section."""
    data: dict[str, Any] = {
        "workdir": "work",
        "releases_root": "releases",
        "models": models,
        "reflvqa": {
            "source": {"name": "reddit", "root": str(fixtures / "reddit"), "limit": limit},
            "inspectors": ["inspector"],
            "evaluator": "lexical",
            "max_right_inspectors": 0,
            "factcheck_model": "heuristic",
            "text_corpus": str(fixtures / "kb" / "kb.jsonl"),
            "text_entailment": "lexical:0.5",
            "version": "1.0.0",
            **(reflvqa or {}),
        },
        **fields,
    }
    return write_config(home, name, data)


def fingerprint(path: Path) -> dict[str, Any]:
    """What two runs of the same config must agree on: sample ids, the sha256 of every data
    shard, and the ledger verdict per (sample_id, check, model, context_id)."""
    release = open_release(path)
    shards = {rel: entry.sha256 for rel, entry in release.manifest.files.items() if rel.startswith(f"{DATA_DIR}/")}
    verdicts = Counter(
        (r["sample_id"], r["check"], r["model"], r["context_id"], r["verdict"])
        for r in release.ledger.select(["sample_id", "check", "model", "context_id", "verdict"]).to_pylist()
    )
    return {"sample_ids": release.sample_ids, "shards": shards, "verdicts": verdicts}


# report sections only a DeflectionBench release has (releases/templates/report.html.j2)
DEFLECTION_SECTIONS = (
    "Per-source statistics",
    "Topic distribution before and after curation",
    "Convergence of gating models",
    "Judge errors",
)


def report_sections(path: Path) -> list[str]:
    """The section titles of the release's report (written now), in order."""
    from mmcurate.releases.report import write_report

    return re.findall(r"<h2>([^<]+)</h2>", write_report(path).read_text())


def logged_calls(log: str) -> dict[tuple[str, str], tuple[int, int, int]]:
    """(step, model) -> (calls, cache hits, failed) as a run's log states them after each stage."""
    found = re.findall(r"(\S+) (\S+): (\d+) model calls?, (\d+) cache hits?, (\d+) failed$", log, re.M)
    return {(step, model): (int(c), int(h), int(f)) for step, model, c, h, f in found}


def logged_requests(log: str) -> dict[tuple[str, str], int]:
    """(step, model) -> requests answered, summed over the batches whose progress the log shows."""
    out: Counter[tuple[str, str]] = Counter()
    for step, model, answered, planned in re.findall(r"(\S+) (\S+): (\d+)/(\d+) requests? answered$", log, re.M):
        if answered == planned:  # a batch's last line
            out[(step, model)] += int(planned)
    return dict(out)


def calls(path: Path, stage: str, step: str | None = None) -> list[dict]:
    """The release's ``statistics.calls`` rows of one stage (``I``/``III``), optionally one step."""
    rows = json.loads((path / "manifest.json").read_text())["statistics"]["calls"]
    return [r for r in rows if r["stage"] == stage and (step is None or r["step"] == step)]


# ---------------------------------------------------------------- shared runs

_RUNS: dict[str, Any] = {}  # one run of each kind per test session, shared by the test files


def run_flow(
    config: Path, task_runner: Any = None, version: str | None = None, allow_incomplete: bool = False
) -> tuple[Path, Any]:
    """Run the DeflectionBench flow in-process (needs the Prefect harness); (release, flow run id)."""
    from mmcurate.flows.deflectionbench.curate import deflectionbench

    flow = deflectionbench.with_options(task_runner=task_runner) if task_runner is not None else deflectionbench
    state = flow(config=str(config), version=version, allow_incomplete=allow_incomplete, return_state=True)
    return Path(state.result()), state.state_details.flow_run_id


def baseline(tmp_path_factory: Any, fixtures: Path) -> tuple[Path, Path]:
    """One uninterrupted run of the scripted config on the default thread runner from a fresh
    workdir: (home, release)."""
    if "baseline" not in _RUNS:
        home = tmp_path_factory.mktemp("baseline")
        release, _ = run_flow(scripted_config(home, fixtures))
        _RUNS["baseline"] = (home, release)
    return _RUNS["baseline"]


def pope_runs(
    tmp_path_factory: Any,
    name: str,
    *,
    lvlm: Path,
    grounding: str,
    pope: dict[str, Any],
    models: dict[str, dict[str, Any]] | None = None,
) -> tuple[Path, Path, Path, dict[str, Path]]:
    """A pope release curated in-process (section ``pope`` of the config), then evaluated with
    the scripted vision model ``lvlm`` plain and through Kestrel on ``grounding``: (home, config,
    release, runs by system)."""
    from mmcurate.flows.evaluate import evaluate_release
    from mmcurate.flows.pope.curate import pope as curate

    home = tmp_path_factory.mktemp(name)
    config = write_config(
        home,
        "config.yaml",
        {
            "workdir": "work",
            "releases_root": "releases",
            "models": {"lvlm": {"backend": "scripted", "script": str(lvlm), "vision": True}, **(models or {})},
            "evaluation": {"pope": {"kestrel": {"grounding": grounding}}},
            "pope": pope,
        },
    )
    release = Path(curate(config=str(config)))
    runs = {
        system: Path(
            evaluate_release(release=str(release), model="lvlm", config=str(config), options={"system": system})
        )
        for system in ("plain", "kestrel")
    }
    return home, config, release, runs


def recurate_base(
    tmp_path_factory: Any, name: str, curate: Any, config: Any, models: dict[str, dict[str, Any]]
) -> tuple[Path, Path, Path]:
    """The release a re-curation test starts from: each of ``models``' scripts starts empty (the
    test writes the rules it needs later), ``config(home, models)`` writes the config and the
    flow ``curate`` releases from it: (home, config, release)."""
    home = tmp_path_factory.mktemp(name)
    for spec in models.values():
        (home / spec["script"]).write_text("")
    path = config(home, models)
    return home, path, Path(curate(config=str(path)))


def shard_runs(flow_run_id: Any, wanted: dict[str, int], patience: float = 120.0) -> dict[str, int]:
    """How many task runs of the flow run start with each prefix of ``wanted``, once they all
    reached the API (task runs arrive as events, a little after the flow returns: wait for them,
    generously)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    deadline = time.monotonic() + patience
    while True:
        with get_client(sync_client=True) as client:
            runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
        seen = {prefix: sum(1 for r in runs if r.name.startswith(prefix)) for prefix in wanted}
        if seen == wanted or time.monotonic() > deadline:
            return seen
        time.sleep(1)


def cache_path(home: Path) -> Path:
    return home / "work" / "responses.sqlite"


def forget(cache: Path, where: str) -> int:
    """Delete the cached answers matching the SQL condition ``where``; return how many."""
    db = sqlite3.connect(str(cache), isolation_level=None, timeout=60)
    try:
        return db.execute(f"DELETE FROM responses WHERE {where}").rowcount
    finally:
        db.close()


# ---------------------------------------------------------------- deterministic model server

# fault -> the attempts (1-based) on which a request misbehaves; "always" fails every attempt
FAULT_ATTEMPTS: dict[str, tuple[int, ...]] = {
    "5xx": (1, 2),
    "429": (1,),
    "reset": (1,),
    "hang": (1,),
    "malformed": (1,),
    "empty": (1,),
}
FAULT_PLAN = ["always", "5xx", "429", "reset", "hang", "malformed", "empty"]


def stub_spec(server: StubModel, **fields: Any) -> dict[str, Any]:
    """An ``openai``-backend model spec aimed at ``server``, one request at a time (requests
    arrive in batch order, so a fault plan always hits the same requests)."""
    return {
        "backend": "openai",
        "model": "stub",
        "base_url": server.base_url,
        "revision": "stub-1",
        "concurrency": 1,
        "timeout": 10,
        "max_retries": 3,
        **fields,
    }


class _StubHandler(JsonHandler):
    server: StubModel

    def do_POST(self) -> None:
        body = self._read_json()
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
            if fault == "hang":  # no answer at all: the client's timeout decides
                self.server.released.wait()
                self.close_connection = True
                return
            if fault == "malformed":
                return self._send(200, b'{"choices": [{"message": ')
            if fault == "empty":
                return self._send(200, b"")
        if not self.server.admit():  # held: the test kills or interrupts the run meanwhile
            self.server.released.wait()
            self.close_connection = True
            return
        reply = {
            "object": "chat.completion",
            "usage": {"prompt_tokens": 1, "completion_tokens": 1},
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": self.server.answer(body["messages"])},
                }
            ],
        }
        self._send(200, json.dumps(reply).encode())


class StubModel(HoldingServer):
    """A deterministic OpenAI-compatible model server on 127.0.0.1. It answers as the scripted
    model of ``script`` would (same rules, same default), so a flow through it reaches the same
    verdicts as the scripted backend. On request it misbehaves:

    - ``plan``: the first distinct requests (by messages), in arrival order, get the faults of
      the plan (``FAULT_ATTEMPTS``), the rest none;
    - ``admit``: answer that many requests, then hold every further one unanswered (``arrived``
      is set) until ``released``.

    Attempts per request and every Authorization header are recorded."""

    def __init__(
        self, script: Path, default: str | None, plan: list[str] | None = None, admit: int | None = None
    ) -> None:
        super().__init__(_StubHandler, admit)
        self.rules, self.default = load_rules(script), default
        self.plan = list(plan or [])
        self.faults: dict[str, str] = {}
        self.attempts: Counter[str] = Counter()
        self.authorizations: set[str | None] = set()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    def answer(self, messages: list[dict]) -> str:
        text = text_of(messages)
        return next((rule.answer for rule in self.rules if rule.matches(text)), self.default or "")

    def record(self, ident: str, authorization: str | None) -> tuple[str, int]:
        with self.lock:
            if ident not in self.faults:
                self.faults[ident] = self.plan.pop(0) if self.plan else "ok"
            self.attempts[ident] += 1
            self.authorizations.add(authorization)
            return self.faults[ident], self.attempts[ident]

    def snapshot(self) -> Counter[str]:
        with self.lock:
            return Counter(self.attempts)

    def __enter__(self) -> StubModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self.shutdown()
        self.server_close()


@dataclass
class FaultRun:
    """One flow run through the misbehaving stub with an API key set, and its rerun."""

    home: Path
    release: Path
    key: str
    model: str
    max_retries: int
    faults: dict[str, str]  # request -> fault
    first: Counter  # attempts per request during the first run
    second: Counter  # attempts per request during the rerun
    authorizations: set
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
    """Run the scripted config once with its model behind the misbehaving stub, then rerun it.
    The request that always fails holds its sample out, so both runs allow an incomplete release."""
    if "faults" in _RUNS:
        return _RUNS["faults"]
    home = tmp_path_factory.mktemp("faults")
    key = f"sk-test-{secrets.token_hex(16)}"
    retries = 3
    collect = _Collect()
    loggers = [logging.getLogger(name) for name in LOGGERS]
    levels = [lg.level for lg in loggers]
    os.environ["MMCURATE_TEST_KEY"] = key
    try:
        with StubModel(DRYRUN / "vlm-reader.jsonl", READER["default"], plan=FAULT_PLAN) as stub:
            spec = stub_spec(stub, api_key_env="MMCURATE_TEST_KEY", max_retries=retries)
            config = scripted_config(home, fixtures, models={"proxied": spec})
            for lg in loggers:
                lg.addHandler(collect)
                lg.setLevel(logging.DEBUG)
            try:
                release, first_id = run_flow(config, allow_incomplete=True)
                first = stub.snapshot()
                with ResponseCache.open(f"sqlite:///{cache_path(home)}") as cache:
                    rows_first = cache.count()
                again, second_id = run_flow(config, allow_incomplete=True)
                with ResponseCache.open(f"sqlite:///{cache_path(home)}") as cache:
                    rows_second = cache.count()
            finally:
                for lg, level in zip(loggers, levels):
                    lg.removeHandler(collect)
                    lg.setLevel(level)
            assert again == release
            _RUNS["faults"] = FaultRun(
                home,
                release,
                key,
                "proxied",
                retries,
                dict(stub.faults),
                first,
                stub.snapshot() - first,
                set(stub.authorizations),
                [first_id, second_id],
                collect.lines,
                (rows_first, rows_second),
            )
    finally:
        os.environ.pop("MMCURATE_TEST_KEY", None)
    return _RUNS["faults"]


# ---------------------------------------------------------------------------- crashed runs
PATIENCE = 300.0  # seconds: only ever waited in full if something is broken


def cached_responses(cache_file: Path) -> int:
    """How many responses a run's cache file holds (0 before it exists)."""
    if not cache_file.is_file():
        return 0
    with ResponseCache.open(f"sqlite:///{cache_file}") as cache:
        return cache.count()


def wait_for(condition, what: str) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``PATIENCE``."""
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def kill9_after_admitted(config: Path, home: Path, stub: StubModel, admitted: int) -> int:
    """Run ``mmcurate run deflectionbench`` as a child process against the harness's Prefect
    API, wait until ``stub`` holds a request and ``admitted`` answers are cached, then SIGKILL
    the flow and everything it started; returns the child's exit code."""
    import signal
    import subprocess
    import sys

    from prefect.settings import get_current_settings

    env = {
        **os.environ,
        "PREFECT_API_URL": str(get_current_settings().api.url),  # the harness's API
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "HF_HUB_OFFLINE": "1",
    }
    mmcurate = Path(sys.executable).parent / "mmcurate"
    log = home / "crashed.log"
    child = subprocess.Popen(
        [str(mmcurate), "run", "deflectionbench", "--config", str(config)],
        cwd=home,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )
    try:
        wait_for(lambda: stub.arrived.is_set() or child.poll() is not None, "the held request")
        assert child.poll() is None, log.read_text()[-3000:]
        wait_for(lambda: cached_responses(cache_path(home)) == admitted, f"{admitted} cached answers")
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the flow and everything it started
        child.wait()
    return child.returncode
