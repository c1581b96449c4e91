"""OpenAI-compatible chat backend (vllm serve, OpenAI, llama.cpp server, Ollama).

Plain ``httpx.AsyncClient`` rather than ``openai.AsyncOpenAI``: we need the raw status,
``Retry-After`` and body to classify faults ourselves, and skipping the SDK's response
models is measurably cheaper per call (bench/gating_throughput.py compares the two).

Concurrency is bounded by ``asyncio.Semaphore(spec.concurrency)``. Retried (tenacity) up to
``spec.max_retries`` times with exponential backoff and equal jitter: HTTP 408/429/5xx (429
and 503 honour ``Retry-After``), timeouts, connection errors/resets, and 200 responses
whose body is empty, not JSON or has no message content. Other 4xx fail at once. A
request that never succeeds becomes ``ChatResponse(text=None, error=...)``.

The API key lives only in the client's Authorization header; it is scrubbed from any
error text built from a server reply.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import time
from collections.abc import Sequence
from typing import Any

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt
from tenacity.wait import wait_exponential, wait_random_exponential

from mmcurate.core.config import ModelSpec
from mmcurate.core.images import ImageStore
from mmcurate.models.backends.base import Backend, OnResult, RequestError
from mmcurate.models.backends.loop import LoopThread
from mmcurate.models.backends.messages import to_openai_messages
from mmcurate.models.requests import ChatRequest, ChatResponse, sampling

OPENAI_URL = "https://api.openai.com/v1"
RETRY_STATUS = {408, 429, 500, 502, 503, 504}


class _BadBody(Exception):
    """A 200 reply that carries no usable answer (retryable)."""


class _Retryable(Exception):
    """An attempt that failed in a way worth retrying; ``retry_after``: the wait the server asked for."""

    def __init__(self, error: str, retry_after: float | None = None) -> None:
        super().__init__(error)
        self.retry_after = retry_after


class Backoff:
    """Exponential backoff with equal jitter: after attempt n (from 0) the wait is in [d/2, d],
    d = min(cap, base * 2**n), tenacity's exponential wait (d/2) plus its random exponential
    wait (uniform in [0, d/2])."""

    def __init__(self, base: float = 0.5, cap: float = 30.0, retry_after_cap: float = 120.0) -> None:
        self.base, self.cap, self.retry_after_cap = base, cap, retry_after_cap
        self._jittered = wait_exponential(multiplier=base / 2, max=cap / 2) + wait_random_exponential(
            multiplier=base / 2, max=cap / 2
        )

    def wait(self, state: RetryCallState) -> float:
        """The wait after the attempt ``state`` ended: the server's Retry-After when it gave one."""
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, _Retryable) and error.retry_after is not None:
            return error.retry_after
        return self._jittered(state)

    async def pause(self, seconds: float) -> None:
        """The wait between two attempts (one place, so a test can record it instead)."""
        await asyncio.sleep(seconds)


def retry_after_seconds(value: str | None, cap: float) -> float | None:
    """Parse a Retry-After header (seconds or HTTP date); None when absent or unreadable."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, min(seconds, cap))


def parse_completion(body: bytes) -> tuple[str, dict[str, Any], list[dict[str, float]] | None]:
    """(text, usage, top_logprobs) from a chat-completion body; _BadBody if unusable."""
    if not body.strip():
        raise _BadBody("empty response body")
    try:
        data = json.loads(body)
        message = data["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise _BadBody("malformed response body") from None
    text = message.get("content") if isinstance(message, dict) else None
    if not isinstance(text, str):
        raise _BadBody("response has no message content")
    usage = data.get("usage") or {}
    top = None
    logprobs = (data["choices"][0].get("logprobs") or {}).get("content")
    if logprobs:
        top = [{alt["token"]: alt["logprob"] for alt in tok.get("top_logprobs") or []} for tok in logprobs]
    return text, usage, top


class OpenAICompatBackend(Backend):
    def __init__(
        self,
        spec: ModelSpec,
        images: ImageStore | None,
        base_url: str,
        api_key: str | None,
        model_id: str,
        penalty_field: str | None,
        backoff: Backoff | None = None,
    ) -> None:
        """``penalty_field``: body field for spec.repetition_penalty (``repetition_penalty``
        for vLLM, ``repeat_penalty`` for llama.cpp), None for servers that reject it (OpenAI)."""
        self.spec = spec
        self.images = images
        self.base_url = base_url.rstrip("/")
        self.model_id = model_id
        self.penalty_field = penalty_field
        self.backoff = backoff or Backoff()
        self._api_key = api_key
        self._loop = LoopThread()
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:  # created on the loop thread, which owns it
            headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
            self._client = httpx.AsyncClient(
                base_url=self.base_url,
                headers=headers,
                timeout=httpx.Timeout(self.spec.timeout),
                limits=httpx.Limits(
                    max_connections=self.spec.concurrency, max_keepalive_connections=self.spec.concurrency
                ),
            )
        return self._client

    def run(self, requests: Sequence[ChatRequest], on_result: OnResult) -> None:
        self._loop.run(self._run_all, requests, on_result)

    async def _run_all(self, requests: Sequence[ChatRequest], on_result: OnResult) -> None:
        gate = asyncio.Semaphore(self.spec.concurrency)
        client = self._http()

        async def one(index: int, request: ChatRequest) -> None:
            async with gate:
                response = await self._call(client, request)
            on_result(index, response)

        await asyncio.gather(*(one(i, r) for i, r in enumerate(requests)))

    def body(self, request: ChatRequest, messages: list[dict]) -> dict[str, Any]:
        params = sampling(self.spec, request)
        body: dict[str, Any] = {
            "model": self.model_id,
            "messages": messages,
            "temperature": params["temperature"],
            "top_p": params["top_p"],
            "max_tokens": params["max_tokens"],
        }
        if params["seed"] is not None:
            body["seed"] = params["seed"]
        if self.penalty_field:
            body[self.penalty_field] = params["repetition_penalty"]
        if request.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = request.logprobs
        return body

    def _scrub(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text

    def _failed(self, request: ChatRequest, error: str, started: float, dropped: int = 0) -> ChatResponse:
        return ChatResponse(
            key=request.key,
            model=self.spec.name,
            text=None,
            error=self._scrub(error),
            cached=False,
            latency=time.perf_counter() - started,
            images_dropped=dropped,
        )

    async def _call(self, client: httpx.AsyncClient, request: ChatRequest) -> ChatResponse:
        started = time.perf_counter()
        try:
            messages, dropped = to_openai_messages(
                request.messages, self.images, self.spec.vision, self.spec.image_max_side
            )
        except RequestError as exc:
            return self._failed(request, str(exc), started)
        body = self.body(request, messages)
        attempts = self.spec.max_retries + 1
        retrying = AsyncRetrying(
            stop=stop_after_attempt(attempts),
            wait=self.backoff.wait,
            sleep=self.backoff.pause,
            retry=retry_if_exception_type(_Retryable),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    response = await self._attempt(client, request, body, started, dropped)
        except _Retryable as exc:
            return self._failed(request, f"{exc} (gave up after {attempts} attempts)", started, dropped)
        return response

    async def _attempt(
        self, client: httpx.AsyncClient, request: ChatRequest, body: dict[str, Any], started: float, dropped: int
    ) -> ChatResponse:
        """One attempt: the answer, a failure that is not worth retrying, or ``_Retryable``."""
        try:
            reply = await client.post("/chat/completions", json=body)
        except httpx.TimeoutException:
            raise _Retryable(f"timed out after {self.spec.timeout}s") from None
        except httpx.TransportError as exc:
            raise _Retryable(f"connection error ({type(exc).__name__})") from None
        status = reply.status_code
        if status != 200:
            error = f"HTTP {status}: {reply.text[:200]}"
            if status not in RETRY_STATUS:
                return self._failed(request, error, started, dropped)
            raise _Retryable(error, retry_after_seconds(reply.headers.get("retry-after"), self.backoff.retry_after_cap))
        try:
            text, usage, top = parse_completion(reply.content)
        except _BadBody as exc:
            raise _Retryable(str(exc)) from None
        return ChatResponse(
            key=request.key,
            model=self.spec.name,
            text=text,
            error=None,
            cached=False,
            latency=time.perf_counter() - started,
            usage=usage,
            images_dropped=dropped,
            top_logprobs=top,
        )

    def close(self) -> None:
        if self._client is not None:
            self._loop.run(self._client.aclose)
            self._client = None
        self._loop.stop()
