"""Retries against the fault server: each fault is retried within limits; hopeless calls fail
cleanly. Nothing waits on a clock: a held request is let go by the test once it arrived, a
request that is never answered ends by the client's timeout whatever its length, and the
waits between attempts are recorded instead of slept."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from mmcurate.models.backends import openai_compat
from mmcurate.models.backends.openai_compat import Backoff, OpenAICompatBackend
from mmcurate.models.client import ModelClient
from mmcurate.models.requests import ChatRequest

KINDS = ["ok", "500x2", "429", "hang", "malformed", "empty", "reset", "always500", "401"]
PATIENCE = 120.0  # seconds: only ever waited in full if something is broken


def ask(ident: str, kind: str) -> ChatRequest:
    return ChatRequest(ident, [{"role": "user", "content": f"id={ident} fault={kind}"}], "test.v1")


@pytest.fixture
def waits(monkeypatch) -> list[float]:
    """The pauses the backend takes between attempts, recorded and not slept (only the
    backend's: patching asyncio.sleep would also catch every other event loop's sleeps)."""
    taken: list[float] = []

    async def record(self, delay: float) -> None:
        taken.append(delay)
        await asyncio.sleep(0)

    monkeypatch.setattr(openai_compat.Backoff, "pause", record)
    return taken


def test_faults_are_retried_within_limits(fault_server, fault_spec, cache, counter, waits):
    # the timeout only guards against a hang: the held request is let go once it has arrived
    spec = fault_spec(max_retries=3, timeout=PATIENCE, concurrency=len(KINDS))
    backend = OpenAICompatBackend(
        spec, None, spec.base_url, None, spec.model, "repetition_penalty", backoff=Backoff(base=0.05, cap=0.2)
    )
    client = ModelClient(spec, backend, cache, counter)
    try:
        with ThreadPoolExecutor(1) as pool:
            asked = pool.submit(client.chat, [ask(kind, kind) for kind in KINDS], stage="test")
            assert fault_server.arrived.wait(PATIENCE), "the hanging request never arrived"
            fault_server.released.set()  # its connection closes unanswered: a connection error
            responses = asked.result(PATIENCE)
    finally:
        client.close()
    by_key = {r.key: r for r in responses}
    assert [r.key for r in responses] == KINDS  # same order as the requests
    hits = fault_server.hits()
    expected_hits = {
        "ok": 1,
        "500x2": 3,
        "429": 2,
        "hang": 2,
        "malformed": 2,
        "empty": 2,
        "reset": 2,
        "always500": 4,
        "401": 1,
    }
    assert dict(hits) == expected_hits
    for kind in ["ok", "500x2", "429", "hang", "malformed", "empty", "reset"]:
        assert by_key[kind].text == f"answer {kind}" and by_key[kind].error is None, kind
    # one pause per retry (11); the 429's is its Retry-After (1 s), every other a backoff of 0.025-0.2 s
    assert sum(hits.values()) - len(KINDS) == len(waits)
    assert waits.count(1.0) == 1 and all(0.025 <= w <= 0.2 for w in waits if w != 1.0)
    assert by_key["always500"].text is None
    assert "HTTP 500" in by_key["always500"].error and "4 attempts" in by_key["always500"].error
    assert by_key["401"].text is None and by_key["401"].error.startswith("HTTP 401")  # not retried
    # the seven answered calls report the stub's usage (3 prompt, 2 completion tokens each)
    assert counter.rows() == [
        {
            "stage": "test",
            "model": "faulty",
            "calls": 9,
            "cache_hits": 0,
            "failures": 2,
            "usage_calls": 7,
            "prompt_tokens": 21,
            "completion_tokens": 14,
        }
    ]
    assert cache.count() == 7  # failures are never cached


def test_a_request_never_answered_ends_by_the_timeout_and_is_retried(fault_server, fault_spec, cache, counter, waits):
    """Every attempt is held until the test ends, so the timeout ends each one, however short
    it is and however slow the machine: two attempts, then a clean failure."""
    spec = fault_spec(max_retries=1, timeout=1.0)
    backend = OpenAICompatBackend(spec, None, spec.base_url, None, spec.model, None, backoff=Backoff(0.01, 0.01))
    client = ModelClient(spec, backend, cache, counter)
    try:
        (response,) = client.chat([ask("slow", "hangs")], "s")
    finally:
        client.close()
    assert response.text is None
    assert response.error == "timed out after 1.0s (gave up after 2 attempts)"
    assert fault_server.hits() == {"slow": 2} and len(waits) == 1
    assert counter.totals == {"calls": 1, "cache_hits": 0, "failures": 1} and cache.count() == 0


def test_failures_are_retried_next_run_successes_are_not(fault_server, fault_spec, cache, counter):
    spec = fault_spec(max_retries=0)
    backend = OpenAICompatBackend(spec, None, spec.base_url, None, spec.model, None, backoff=Backoff(0.01, 0.01))
    client = ModelClient(spec, backend, cache, counter)
    batch = [ask("a", "ok"), ask("b", "always500"), ask("a", "ok")]  # duplicate sent once
    try:
        first = client.chat(batch, "s")
        second = client.chat(batch, "s")
    finally:
        client.close()
    assert [r.text for r in first] == ["answer a", None, "answer a"]
    assert [r.cached for r in second] == [True, False, True]
    assert fault_server.hits() == {"a": 1, "b": 2}
    # the duplicate "a" of the first batch is a cache hit: every request is a call or a cache hit
    assert counter.totals == {"calls": 3, "cache_hits": 3, "failures": 2}


def test_request_body_carries_sampling_parameters(fault_server, fault_spec, cache, counter):
    spec = fault_spec(temperature=0.0, top_p=0.9, repetition_penalty=1.1, max_tokens=7, seed=3)
    backend = OpenAICompatBackend(spec, None, spec.base_url, None, spec.model, "repetition_penalty")
    client = ModelClient(spec, backend, cache, counter)
    try:
        client.chat(
            [ChatRequest("x", [{"role": "user", "content": "id=x fault=ok"}], "t", max_tokens=5, logprobs=2)], "s"
        )
    finally:
        client.close()
    body = fault_server.received[0][1]
    assert body["model"] == "fault-model"
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (0.0, 0.9, 5, 3)
    assert body["repetition_penalty"] == 1.1
    assert (body["logprobs"], body["top_logprobs"]) == (True, 2)
