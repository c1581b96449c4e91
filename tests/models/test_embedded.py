"""The embedded default: a real llama.cpp server with SmolLM2-135M answering over HTTP."""

from __future__ import annotations

import httpx
import pytest

from mmcurate.core.config import ModelSpec, Settings, load_config
from mmcurate.core.errors import ConfigError
from mmcurate.models.backends.base import BackendError
from mmcurate.models.backends.embedded import LlamaServer, find_gguf
from mmcurate.models.backends.openai_compat import OpenAICompatBackend
from mmcurate.models.client import ModelClient, ModelPool
from mmcurate.models.requests import ChatRequest

QUESTION = [{"role": "user", "content": "What is the capital of France? Answer in a few words."}]


def test_real_model_answers_and_is_cached(llama_server, cache, counter):
    spec = ModelSpec(name="smollm2", backend="embedded", temperature=0.0, max_tokens=12, concurrency=2)
    backend = OpenAICompatBackend(spec, None, llama_server.base_url, None, "smollm2", "repeat_penalty")
    client = ModelClient(spec, backend, cache, counter)
    try:
        batch = [ChatRequest("q1", QUESTION, "t.v1"), ChatRequest("q2", QUESTION, "t.v1", logprobs=3)]
        first = client.chat(batch, "embedded")
        second = client.chat(batch, "embedded")
    finally:
        client.close()
    # what the model says is its own business (it may even stop at once): only the exchange is checked
    for answer in first:
        assert answer.error is None and isinstance(answer.text, str) and not answer.cached
        assert 0 <= answer.usage["completion_tokens"] <= 12
    assert first[0].top_logprobs is None  # asked only for the second
    steps = first[1].top_logprobs
    assert isinstance(steps, list) and len(steps) <= 12
    assert all(isinstance(step, dict) and 1 <= len(step) <= 3 for step in steps)
    # the second batch is the first, from the cache
    assert [(a.cached, a.text) for a in second] == [(True, a.text) for a in first]
    assert second[1].top_logprobs == first[1].top_logprobs
    assert counter.totals == {"calls": 2, "cache_hits": 2, "failures": 0}


def test_pool_starts_and_stops_the_embedded_server(cache, counter):
    spec = ModelSpec(name="local", backend="embedded", max_tokens=4)
    with ModelPool(Settings(models={"local": spec}), cache, None, counter) as pool:
        client = pool.client("local")
        server = client.backend.server
        (answer,) = client.chat([ChatRequest("k", QUESTION, "t.v1")], "s")
        assert answer.error is None and isinstance(answer.text, str) and server.running
        pool.release("local")
        assert not server.running and not server.log_path.exists()


def test_server_that_cannot_start_reports_its_log(tmp_path):
    fake = tmp_path / "broken.gguf"
    fake.write_bytes(b"not a gguf file")
    with pytest.raises(BackendError, match="llama.cpp server exited") as error:
        LlamaServer(fake, n_ctx=256, alias="broken", startup_timeout=60)
    assert "log tail" in str(error.value)


def test_only_chat_models_can_be_configured(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("models:\n  base: {backend: embedded, gguf: gemma3-270m}\n")
    with pytest.raises(ConfigError, match="models.base.gguf"):
        load_config(config)
    with pytest.raises(BackendError, match="gemma3-270m"):
        find_gguf("gemma3-270m")


def test_a_port_taken_before_the_server_binds_it_is_retried(monkeypatch):
    """Two runs side by side (``make demo``'s chains) may both be handed one free port: the server
    that loses the race exits with "address already in use", and one that answers on the port is
    not taken for ours unless our process holds the socket. Here another HTTP server already
    answers ``/v1/models`` on the first port handed out: ours must start on the next one."""
    import http.server
    import threading

    from mmcurate.models.backends import embedded

    class Models(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"object": "list", "data": [{"id": "smollm2"}]}')

        def log_message(self, *args):
            pass

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    taken = other.server_address[1]
    handed = iter([taken])
    real_free_port = embedded.free_port
    monkeypatch.setattr(embedded, "free_port", lambda: next(handed, None) or real_free_port())
    try:
        server = LlamaServer(find_gguf("smollm2"), n_ctx=256, alias="smollm2", startup_timeout=120)
        try:
            assert server.port != taken and server.running and server._listens()
        finally:
            server.stop()
    finally:
        other.shutdown()
        other.server_close()


def test_the_server_takes_content_lists_of_text_parts(llama_server):
    """Issue 42 item 1: OpenAI clients such as lmms-eval send every content as a list of parts;
    llama-cpp-python's server refused a system message's list (HTTP 500, "Input should be a
    valid string"), so every lmms-eval request failed. Started through ``llama_launch`` it answers."""
    body = {
        "model": "smollm2",
        "max_tokens": 4,
        "temperature": 0.0,
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "Answer in a few words."}]},
            {
                "role": "user",
                "content": [{"type": "text", "text": "What is the capital"}, {"type": "text", "text": "of France?"}],
            },
        ],
    }
    reply = httpx.post(f"{llama_server.base_url}/chat/completions", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    assert isinstance(reply.json()["choices"][0]["message"]["content"], str)
