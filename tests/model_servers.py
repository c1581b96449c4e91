"""Model-server fixtures (a pytest plugin of tests/conftest.py): one real llama.cpp server per
session, and a fault-injecting HTTP server.

The fault server speaks just enough of ``POST /v1/chat/completions`` to answer, and
misbehaves on request: the last user message carries ``id=<id>`` and ``fault=<kind>``.
Every request it receives is recorded (id, body, headers) so tests can check what was
sent and how often. Nothing here depends on timing: a held request sets ``arrived`` and
waits for ``released``. ``hang`` holds the first attempt and then drops it unanswered (the
connection closes without a response); ``hangs`` holds every attempt, so only the client's
timeout ends them, whatever its length; ``admit = N`` answers N requests and then holds the
rest until ``released``.
"""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from mmcurate.core.config import ModelSpec
from mmcurate.models.accounting import CallCounter
from mmcurate.models.cache import ResponseCache
from mmcurate.models.requests import text_of

# kind -> how many first attempts misbehave (None: every attempt)
FAULTS: dict[str, int | None] = {
    "ok": 0,
    "500x2": 2,
    "429": 1,
    "hang": 1,
    "malformed": 1,
    "empty": 1,
    "reset": 1,
    "always500": None,
    "401": None,
    "hangs": None,
}


class JsonHandler(BaseHTTPRequestHandler):
    """Quiet HTTP/1.1 handler that sends JSON, one request per connection (also the base of
    flowkit's scripted stub server)."""

    protocol_version = "HTTP/1.1"
    models = b'{"object": "list", "data": []}'  # GET /v1/models

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        self._send(200, self.models)

    def _read_json(self) -> Any:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        # one request per connection: a kept-alive socket that a fault left half-dead would
        # make the client's next attempt fail before it reaches us, blurring the counts
        self.send_header("Connection", "close")
        self.close_connection = True
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


class HoldingServer(ThreadingHTTPServer):
    """A threaded server on 127.0.0.1 that can hold requests: with ``admit_left = N`` it answers
    N requests, then holds every further one (``arrived`` is set) until ``released``."""

    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler], admit: int | None = None) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.base_url = f"http://127.0.0.1:{self.server_address[1]}/v1"
        self.admit_left = admit  # answer this many, then hold the rest
        self.arrived = threading.Event()  # a request is being held
        self.released = threading.Event()  # held and hanging requests may go
        self.lock = threading.Lock()

    def admit(self) -> bool:
        with self.lock:
            if self.admit_left is None:
                return True
            if self.admit_left > 0:
                self.admit_left -= 1
                return True
        self.arrived.set()
        return False

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that gave up (timeouts, a killed run) close their end: not a test failure


class _Handler(JsonHandler):
    server: FaultServer
    models = b'{"object": "list", "data": [{"id": "fault", "object": "model"}]}'

    def do_POST(self) -> None:
        body = self._read_json()
        prompt = text_of([m for m in body["messages"] if m["role"] == "user"][-1:])
        ident = re.search(r"id=(\S+)", prompt).group(1)
        kind = re.search(r"fault=(\S+)", prompt).group(1)
        attempt = self.server.record(ident, body, dict(self.headers))
        bad = FAULTS[kind]
        misbehave = bad is None or attempt <= bad
        if misbehave and kind in ("500x2", "always500"):
            return self._send(500, b'{"error": "internal"}')
        if misbehave and kind == "429":
            return self._send(429, b'{"error": "slow down"}', {"Retry-After": "1"})
        if misbehave and kind == "401":  # a server that echoes the credential back
            return self._send(401, json.dumps({"error": f"bad key {self.headers['Authorization']}"}).encode())
        if misbehave and kind in ("hang", "hangs"):
            self.server.arrived.set()
            self.server.released.wait()
            self.close_connection = True  # no response at all: the client sees the connection end
            return
        if misbehave and kind == "malformed":
            return self._send(200, b'{"choices": [{"message": ')
        if misbehave and kind == "empty":
            return self._send(200, b"")
        if misbehave and kind == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        if not self.server.admit():
            self.server.released.wait()
            return
        reply = {
            "object": "chat.completion",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": f"answer {ident}"}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }
        self._send(200, json.dumps(reply).encode())


class FaultServer(HoldingServer):
    def __init__(self) -> None:
        super().__init__(_Handler)
        self.received: list[tuple[str, dict, dict[str, str]]] = []

    def record(self, ident: str, body: dict, headers: dict[str, str]) -> int:
        with self.lock:
            self.received.append((ident, body, headers))
            return sum(1 for r in self.received if r[0] == ident)

    def hits(self) -> Counter[str]:
        with self.lock:
            return Counter(r[0] for r in self.received)


@pytest.fixture
def fault_server() -> Iterator[FaultServer]:
    server = FaultServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.released.set()
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def llama_server() -> Iterator[Any]:
    """One real llama.cpp server with SmolLM2-135M for the whole session."""
    from mmcurate.models.backends.embedded import LlamaServer, find_gguf

    server = LlamaServer(find_gguf("smollm2"), n_ctx=2048, alias="smollm2")
    yield server
    server.stop()


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[ResponseCache]:
    with ResponseCache.open(f"sqlite:///{tmp_path / 'responses.sqlite'}") as opened:
        yield opened


@pytest.fixture
def counter() -> CallCounter:
    return CallCounter()


@pytest.fixture
def fault_spec(fault_server: FaultServer) -> Callable[..., ModelSpec]:
    """Factory of openai-backend specs aimed at the fault server (whose replies are immediate:
    the timeout matters only for a request it holds)."""

    def make(**overrides: Any) -> ModelSpec:
        fields = dict(
            name="faulty",
            backend="openai",
            model="fault-model",
            base_url=fault_server.base_url,
            timeout=30.0,
            max_retries=3,
            concurrency=4,
        )
        return ModelSpec(**{**fields, **overrides})

    return make
