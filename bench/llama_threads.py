"""The embedded llama.cpp server's threads (``ModelSpec.n_threads``), measured side by side in one run.

``make demo`` runs two chains at once, each command with its own SmolLM2 server, beside MiniLM and
the flows themselves; each server used 2 threads on this 2-core machine. This bench generates the
same completions (greedy, ``--max-tokens`` each, one request at a time per server) through servers
started with 1 and with 2 threads, alternating rounds: first one server alone, then two servers
answering at once (as the demo's chains do). Printed per setting: tokens/s over all servers and the
CPU seconds the servers spent, and the ratio of 1 thread to 2 (>= 1.0: 1 thread faster).

Usage: python bench/llama_threads.py [--prompts 8] [--rounds 2] [--max-tokens 96]
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

import httpx
import psutil
from ingest_reddit import _positive

from mmcurate.models.backends.embedded import LlamaServer, find_gguf

SETTINGS = (1, 2)  # threads per server


def completions(base_url: str, prompts: int, max_tokens: int, out: list[int]) -> None:
    """Greedy completions one after the other; the completion tokens are appended to ``out``."""
    tokens = 0
    with httpx.Client(timeout=600) as client:
        for i in range(prompts):
            body = {
                "messages": [{"role": "user", "content": f"Write a long story about kite number {i}."}],
                "max_tokens": max_tokens,
                "temperature": 0,
            }
            reply = client.post(f"{base_url}/chat/completions", json=body)
            reply.raise_for_status()
            tokens += int(reply.json()["usage"]["completion_tokens"])
    out.append(tokens)


def cpu_seconds(process: psutil.Process) -> float:
    """User + system CPU seconds of a process and its children (the server runs in a child)."""
    return sum(sum(p.cpu_times()[:2]) for p in (process, *process.children(recursive=True)))


def measure(threads: int, servers: int, prompts: int, max_tokens: int) -> tuple[float, float]:
    """(tokens/s over all servers, CPU seconds of the servers) with ``servers`` answering at once."""
    started = [
        LlamaServer(find_gguf("smollm2"), n_ctx=2048, alias="smollm2", n_threads=threads) for _ in range(servers)
    ]
    try:
        processes = [psutil.Process(server.process.pid) for server in started]
        before = sum(map(cpu_seconds, processes))
        out: list[int] = []
        workers = [
            threading.Thread(target=completions, args=(server.base_url, prompts, max_tokens, out)) for server in started
        ]
        clock = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        seconds = time.perf_counter() - clock
        if len(out) != servers:
            raise SystemExit("a server's completions failed (see the error above)")
        return sum(out) / seconds, sum(map(cpu_seconds, processes)) - before
    finally:
        for server in started:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=_positive, default=8, help="completions per server per round")
    parser.add_argument("--rounds", type=_positive, default=2, help="rounds per setting (medians printed)")
    parser.add_argument("--max-tokens", type=_positive, default=96)
    args = parser.parse_args()
    print(
        f"load {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs; SmolLM2 (llama.cpp), greedy, {args.max_tokens} tokens"
    )
    for servers in (1, 2):
        rates: dict[int, list[float]] = {t: [] for t in SETTINGS}
        cpus: dict[int, list[float]] = {t: [] for t in SETTINGS}
        for _ in range(args.rounds):
            for threads in SETTINGS:
                rate, cpu = measure(threads, servers, args.prompts, args.max_tokens)
                rates[threads].append(rate)
                cpus[threads].append(cpu)
        one, two = (statistics.median(rates[t]) for t in SETTINGS)
        print(
            f"{servers} server(s) at once: tokens/s 1 thread {one:.1f}, 2 threads {two:.1f}: ratio {one / two:.2f}; "
            f"server CPU s {statistics.median(cpus[1]):.1f} / {statistics.median(cpus[2]):.1f}",
            flush=True,
        )
    print(f"load {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
