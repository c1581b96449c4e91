"""Retries against the fault server: each fault is retried within limits; hopeless calls fail cleanly."""
from __future__ import annotations

from mmcurate.models.backends.openai_compat import Backoff, OpenAICompatBackend
from mmcurate.models.client import ModelClient
from mmcurate.models.requests import ChatRequest

KINDS = ["ok", "500x2", "429", "hang", "malformed", "empty", "reset", "always500", "401"]


def ask(ident: str, kind: str) -> ChatRequest:
    return ChatRequest(ident, [{"role": "user", "content": f"id={ident} fault={kind}"}], "test.v1")


def test_faults_are_retried_within_limits(fault_server, fault_spec, cache, counter):
    # the hanging request is never answered, so the timeout ends it; every other reply is
    # immediate, so no other request comes near it
    spec = fault_spec(max_retries=3, timeout=10.0, concurrency=len(KINDS))
    backend = OpenAICompatBackend(spec, None, spec.base_url, None, spec.model, "repetition_penalty",
                                  backoff=Backoff(base=0.05, cap=0.2))
    client = ModelClient(spec, backend, cache, counter)
    try:
        responses = client.chat([ask(kind, kind) for kind in KINDS], stage="test")
    finally:
        client.close()
    by_key = {r.key: r for r in responses}
    assert [r.key for r in responses] == KINDS  # same order as the requests
    hits = fault_server.hits()
    expected_hits = {"ok": 1, "500x2": 3, "429": 2, "hang": 2, "malformed": 2, "empty": 2, "reset": 2,
                     "always500": 4, "401": 1}
    assert dict(hits) == expected_hits
    for kind in ["ok", "500x2", "429", "hang", "malformed", "empty", "reset"]:
        assert by_key[kind].text == f"answer {kind}" and by_key[kind].error is None, kind
    assert by_key["429"].latency >= 1.0  # Retry-After: 1 was honoured, not the 0.05s backoff
    assert by_key["always500"].text is None
    assert "HTTP 500" in by_key["always500"].error and "4 attempts" in by_key["always500"].error
    assert by_key["401"].text is None and by_key["401"].error.startswith("HTTP 401")  # not retried
    # the seven answered calls report the stub's usage (3 prompt, 2 completion tokens each)
    assert counter.rows() == [{"stage": "test", "model": "faulty", "calls": 9, "cache_hits": 0, "failures": 2,
                               "usage_calls": 7, "prompt_tokens": 21, "completion_tokens": 14}]
    assert cache.count() == 7  # failures are never cached


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
    assert counter.totals == {"calls": 3, "cache_hits": 2, "failures": 2}


def test_request_body_carries_sampling_parameters(fault_server, fault_spec, cache, counter):
    spec = fault_spec(temperature=0.0, top_p=0.9, repetition_penalty=1.1, max_tokens=7, seed=3)
    backend = OpenAICompatBackend(spec, None, spec.base_url, None, spec.model, "repetition_penalty")
    client = ModelClient(spec, backend, cache, counter)
    try:
        client.chat([ChatRequest("x", [{"role": "user", "content": "id=x fault=ok"}], "t", max_tokens=5, logprobs=2)], "s")
    finally:
        client.close()
    body = fault_server.received[0][1]
    assert body["model"] == "fault-model"
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (0.0, 0.9, 5, 3)
    assert body["repetition_penalty"] == 1.1
    assert (body["logprobs"], body["top_logprobs"]) == (True, 2)
