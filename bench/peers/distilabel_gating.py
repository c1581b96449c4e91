"""Gating throughput against distilabel: the same requests to one local llama.cpp server.

The peer is distilabel's OpenAI-compatible LLM (``distilabel.models.llms.OpenAILLM`` with
``base_url``), called through its documented ``agenerate`` (one chat input, one generation)
under an ``asyncio.Semaphore`` of the same concurrency as mmcurate's gating layer (``ModelClient``
over the OpenAI-compatible backend, a fresh response cache each round so every request is a real
call, as in ``bench/gating_throughput.py``). A ``TextGeneration`` step sends a whole input batch
at once, so its concurrency is its batch size with a barrier between batches; ``agenerate``
under a semaphore is the closest to the gating layer's steady ``concurrency`` requests in flight.

Same decoding both ways: temperature 0 (greedy), the same ``top_p``, ``max_tokens`` and, through
distilabel's ``extra_body``, the same ``seed`` and llama.cpp ``repeat_penalty`` the gating layer
sends. The runs alternate (distilabel first in even rounds, mmcurate first in odd ones) on one
server started as ``bench/gating_throughput.py`` starts it (127.0.0.1, SmolLM2), after a warm-up.

On the llama.cpp server the model's time dominates; the same comparison against an instant stub
server (``gating_throughput.stub_server``, 300 requests x 2 rounds at concurrency 8, as that
bench's part (c)) measures what each client layer itself costs per request.

Printed: requests/s of each, their ratio (mmcurate / distilabel, >= 1.0: mmcurate ahead), how many
answers are equal (same text for the same request), and the date, commit and load.

    python bench/peers/distilabel_gating.py [--quick] [--prompts 48] [--rounds 2] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]  # bench/, provenance

from gating_throughput import ours_run, prompts, stub_server
from provenance import stamp

from mmcurate.core.config import ModelSpec
from mmcurate.models.accounting import CallCounter
from mmcurate.models.backends.embedded import LlamaServer, find_gguf
from mmcurate.models.cache import ResponseCache
from mmcurate.models.requests import ChatRequest

MODEL = "smollm2"


async def distilabel_run(
    spec: ModelSpec, base_url: str, requests: list[ChatRequest], model: str = MODEL
) -> tuple[float, list[str | None]]:
    """Seconds for distilabel's ``OpenAILLM`` to answer ``requests`` ``spec.concurrency`` at a time,
    and its answers in request order."""
    warnings.filterwarnings(
        "ignore", message="The 'default' attribute"
    )  # distilabel 1.5.3's models under pydantic 2.12
    from distilabel.models.llms import OpenAILLM

    llm = OpenAILLM(model=model, base_url=base_url, api_key="unused", max_retries=0, timeout=int(spec.timeout))
    llm.load()
    gate = asyncio.Semaphore(spec.concurrency)
    extra = {"seed": spec.seed, "repeat_penalty": spec.repetition_penalty}

    async def one(request: ChatRequest) -> str | None:
        async with gate:
            output = await llm.agenerate(
                input=request.messages,
                max_new_tokens=spec.max_tokens,
                temperature=spec.temperature,
                top_p=spec.top_p,
                extra_body=extra,
            )
        return output["generations"][0]

    try:
        started = time.perf_counter()
        answers = await asyncio.gather(*(one(r) for r in requests))
        return time.perf_counter() - started, list(answers)
    finally:
        await llm._aclient.close()  # distilabel's unload() leaves the async client's pool open


def compare(spec: ModelSpec, base_url: str, n: int, rounds: int, workdir: Path, model: str = MODEL) -> dict:
    """Alternate distilabel / mmcurate rounds on the same requests; times summed, answers compared."""
    times = {"mmcurate": 0.0, "distilabel": 0.0}
    equal = total = 0
    differ: list[str] = []
    for r in range(rounds):
        requests = prompts(n, f"peer{r}-")
        answers: dict[str, list[str | None]] = {}
        for side in ("distilabel", "mmcurate") if r % 2 == 0 else ("mmcurate", "distilabel"):
            if side == "distilabel":
                seconds, answers[side] = asyncio.run(distilabel_run(spec, base_url, requests, model))
            else:
                with ResponseCache(workdir / f"peer-{model}-{r}.sqlite") as cache:
                    seconds, ours = ours_run(spec, base_url, model, requests, cache, CallCounter())
                answers[side] = [a.text for a in ours]
            times[side] += seconds
        for request, peer, mine in zip(requests, answers["distilabel"], answers["mmcurate"]):
            total += 1
            equal += peer == mine
            if peer != mine and len(differ) < 3:
                differ.append(f"{request.key}: distilabel {peer!r} / mmcurate {mine!r}")
    return {
        "rps": {side: n * rounds / seconds for side, seconds in times.items()},
        "equal": equal,
        "total": total,
        "differ": differ,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="8 prompts x 2 rounds")
    parser.add_argument("--prompts", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=16)
    args = parser.parse_args()
    if args.quick:
        args.prompts = 8
    if args.prompts < 1 or args.rounds < 1 or args.concurrency < 1 or args.max_tokens < 1:
        parser.error("--prompts, --rounds, --concurrency and --max-tokens must be at least 1")
    logging.getLogger("distilabel").setLevel(logging.WARNING)
    spec = ModelSpec(
        name=MODEL,
        backend="embedded",
        temperature=0.0,
        max_tokens=args.max_tokens,
        concurrency=args.concurrency,
        timeout=120,
    )
    print(stamp("start"), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        server = LlamaServer(find_gguf(MODEL), n_ctx=2048, alias=MODEL)
        try:
            with ResponseCache(workdir / "warm.sqlite") as cache:  # first calls pay for page-ins
                ours_run(spec, server.base_url, MODEL, prompts(4, "warm"), cache, CallCounter())
            asyncio.run(distilabel_run(spec, server.base_url, prompts(4, "warm-peer")))
            result = compare(spec, server.base_url, args.prompts, args.rounds, workdir)
        finally:
            server.stop()
        with stub_server() as url:
            stub = compare(spec.model_copy(update={"concurrency": 8}), url, 300, 2, workdir, "stub")
    rps = result["rps"]
    print(
        f"llama.cpp server ({MODEL}), {args.prompts} prompts x {args.rounds} rounds, concurrency "
        f"{spec.concurrency}, temperature {spec.temperature}, max_tokens {spec.max_tokens}"
    )
    print(
        f"  mmcurate gating layer {rps['mmcurate']:.2f} req/s, distilabel OpenAILLM.agenerate "
        f"{rps['distilabel']:.2f} req/s, ratio {rps['mmcurate'] / rps['distilabel']:.3f} (>= 1.0: mmcurate ahead)"
    )
    print(
        f"  answers equal: {result['equal']} of {result['total']}"
        + "".join(f"\n    differs: {line}" for line in result["differ"])
    )
    stub_rps = stub["rps"]
    print(
        f"client layers alone, against an instant stub server, 300 requests x 2 rounds, concurrency 8:\n"
        f"  mmcurate {stub_rps['mmcurate']:.0f} req/s (incl. cache writes), distilabel {stub_rps['distilabel']:.0f} "
        f"req/s, ratio {stub_rps['mmcurate'] / stub_rps['distilabel']:.2f}; answers equal: {stub['equal']} of {stub['total']}"
    )
    print(stamp("end"), flush=True)
    if result["equal"] != result["total"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
