"""Throughput of the model layer, measured in one run on this machine.

(a) our layer (ModelClient over the OpenAI-compatible backend, fresh cache so every
    request is a real call) vs a bare ``openai.AsyncOpenAI`` client, same prompts, same
    concurrency, against one embedded llama.cpp server; runs alternate to be fair on a
    noisy machine. Goal: ratio of requests/s >= 0.9.
(b) a fully cached rerun vs the first run. Goal: time ratio <= 0.05 with zero calls.
(c) client overhead alone: the same two clients against an instant local stub server
    (a subprocess), which shows why the backend uses httpx rather than the SDK.

Usage: python bench/gating_throughput.py [--prompts 12] [--rounds 2] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from openai import AsyncOpenAI

from mmcurate.core.config import ModelSpec
from mmcurate.models.accounting import CallCounter
from mmcurate.models.backends.embedded import LlamaServer, find_gguf, free_port
from mmcurate.models.backends.openai_compat import OpenAICompatBackend
from mmcurate.models.cache import ResponseCache
from mmcurate.models.client import ModelClient
from mmcurate.models.requests import ChatRequest, ChatResponse

TOPICS = ["colour", "fruit", "animal", "city", "river", "planet", "metal", "tree", "bird", "sport", "tool", "flower"]
STUB = """
import http.server, json, sys
BODY = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                   "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self): self.do_POST()
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY))); self.end_headers(); self.wfile.write(BODY)
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


@contextmanager
def stub_server() -> Iterator[str]:
    """The base URL of an instant OpenAI-compatible stub (``STUB``, a subprocess on 127.0.0.1)
    once it answers; stopped on exit."""
    port = free_port()
    stub = subprocess.Popen([sys.executable, "-c", STUB, str(port)])
    try:
        url = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                httpx.get(url + "/models", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url
    finally:
        stub.terminate()
        stub.wait()


def prompts(n: int, salt: str) -> list[ChatRequest]:
    return [
        ChatRequest(
            f"p{i}", [{"role": "user", "content": f"Name one {TOPICS[i % len(TOPICS)]}. ({salt}{i})"}], "bench.v1"
        )
        for i in range(n)
    ]


async def bare_run(base_url: str, spec: ModelSpec, requests: list[ChatRequest], model: str) -> float:
    client = AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=spec.timeout)
    gate = asyncio.Semaphore(spec.concurrency)

    async def one(request: ChatRequest) -> str | None:
        async with gate:
            reply = await client.chat.completions.create(
                model=model,
                messages=request.messages,
                max_tokens=spec.max_tokens,  # type: ignore[arg-type]
                temperature=spec.temperature,
                top_p=spec.top_p,
                seed=spec.seed,
                extra_body={"repeat_penalty": spec.repetition_penalty},
            )
            return reply.choices[0].message.content

    try:
        started = time.perf_counter()
        await asyncio.gather(*(one(r) for r in requests))
        return time.perf_counter() - started
    finally:
        await client.close()


def ours_run(
    spec: ModelSpec, base_url: str, model: str, requests: list[ChatRequest], cache: ResponseCache, counter: CallCounter
) -> tuple[float, list[ChatResponse]]:
    """Seconds for our layer to answer ``requests``, and its answers (every one must succeed)."""
    client = ModelClient(spec, OpenAICompatBackend(spec, None, base_url, None, model, "repeat_penalty"), cache, counter)
    try:
        started = time.perf_counter()
        answers = client.chat(requests, "bench")
        elapsed = time.perf_counter() - started
    finally:
        client.close()
    failed = [a.error for a in answers if a.text is None]
    if failed:
        raise SystemExit(f"our layer failed {len(failed)} requests: {failed[0]}")
    return elapsed, answers


def compare(spec: ModelSpec, base_url: str, model: str, n: int, rounds: int, workdir: Path) -> tuple[float, float]:
    """Alternate bare/ours rounds; return (our req/s, bare req/s) summed over rounds."""
    ours_time = bare_time = 0.0
    for r in range(rounds):
        requests = prompts(n, f"r{r}-")
        for first in ("bare", "ours") if r % 2 == 0 else ("ours", "bare"):
            if first == "bare":
                bare_time += asyncio.run(bare_run(base_url, spec, requests, model))
            else:
                with ResponseCache(workdir / f"cmp-{base_url.split(':')[-1].split('/')[0]}-{r}.sqlite") as cache:
                    ours_time += ours_run(spec, base_url, model, requests, cache, CallCounter())[0]
    total = n * rounds
    return total / ours_time, total / bare_time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    spec = ModelSpec(name="smollm2", backend="embedded", max_tokens=16, concurrency=args.concurrency, timeout=60)

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        server = LlamaServer(find_gguf("smollm2"), n_ctx=2048, alias="smollm2")
        try:
            # warm-up: first calls pay for page-ins and allocation
            with ResponseCache(workdir / "warm.sqlite") as cache:
                ours_run(spec, server.base_url, "smollm2", prompts(4, "warm"), cache, CallCounter())
            ours_rps, bare_rps = compare(spec, server.base_url, "smollm2", args.prompts, args.rounds, workdir)
            print(
                f"(a) llama.cpp server, concurrency {spec.concurrency}, {args.prompts} prompts x {args.rounds} "
                f"rounds, max_tokens {spec.max_tokens}"
            )
            print(
                f"    ours {ours_rps:.2f} req/s, bare AsyncOpenAI {bare_rps:.2f} req/s, "
                f"ratio {ours_rps / bare_rps:.3f} (goal >= 0.9)"
            )

            requests = prompts(args.prompts, "cache-")
            with ResponseCache(workdir / "rerun.sqlite") as cache:
                first, _ = ours_run(spec, server.base_url, "smollm2", requests, cache, CallCounter())
                rerun_counter = CallCounter()
                rerun, _ = ours_run(spec, server.base_url, "smollm2", requests, cache, rerun_counter)
            totals = rerun_counter.totals
            print(
                f"(b) first run {first:.3f}s, cached rerun {rerun * 1000:.1f}ms, ratio {rerun / first:.4f} "
                f"(goal <= 0.05); rerun calls {totals['calls']}, cache hits {totals['cache_hits']}"
            )
        finally:
            server.stop()

        with stub_server() as url:
            stub_spec = spec.model_copy(update={"concurrency": 8})
            ours_rps, bare_rps = compare(stub_spec, url, "stub", 300, 2, workdir)
            print(
                f"(c) client overhead vs an instant stub server, concurrency 8: httpx-based layer "
                f"{ours_rps:.0f} req/s (incl. cache writes), AsyncOpenAI {bare_rps:.0f} req/s, "
                f"ratio {ours_rps / bare_rps:.2f}"
            )


if __name__ == "__main__":
    main()
