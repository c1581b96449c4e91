"""``python -m mmcurate.models.backends.llama_launch <llama_cpp.server args>``.

Runs llama-cpp-python's OpenAI-compatible server with two changes:

- ggml's extra weight buffers (the runtime repack and AMX buffer types) are turned off. On
  CPUs that advertise AMX the AMX matmul of llama-cpp-python 0.3.x segfaults at the first
  decode (``ggml_backend_amx_mul_mat``); the server offers no flag for this, so the default
  model parameters are adjusted before it loads the model. For a 135M model the plain CPU
  kernels are fast enough.
- A chat request's content given as a list of text parts is sent on as one string
  (``TextParts``). The server's request model takes a system message's content as a string
  only (HTTP 500, "Input should be a valid string") and a GGUF's chat template joins strings,
  while OpenAI clients such as lmms-eval's ``openai`` model send every content as a list of
  parts. mmcurate's own backend already sends text-only content as a string
  (``messages.to_openai_messages``); the same rule is applied here, so both ask the same thing.
  A list holding any other part (an image) is left as it is.

The server stops when the process that started it dies (``core.lifeline``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import llama_cpp.llama_cpp as llama_lib

from mmcurate.core.lifeline import exit_with_parent
from mmcurate.models.backends.messages import text_content

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def flatten_text_parts(body: bytes) -> bytes:
    """A chat completion request's JSON body with every text-only content list as one string;
    any other body (not JSON, no messages) unchanged, for the server to answer as it does."""
    try:
        request = json.loads(body)
    except ValueError:
        return body
    messages = request.get("messages") if isinstance(request, dict) else None
    if not isinstance(messages, list):
        return body
    changed = False
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        text = text_content(content) if isinstance(content, list) else None
        if text is not None:
            message["content"] = text
            changed = True
    return json.dumps(request).encode() if changed else body


class TextParts:
    """ASGI middleware: the body of ``POST .../chat/completions`` through ``flatten_text_parts``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not scope["path"].endswith("/chat/completions"):
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client left: nothing to answer
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = flatten_text_parts(b"".join(chunks))
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        pending = [{"type": "http.request", "body": body, "more_body": False}]

        async def replay() -> MutableMapping[str, Any]:
            return pending.pop() if pending else await receive()

        await self.app({**scope, "headers": headers}, replay, send)


def main() -> None:
    exit_with_parent()
    default_params = llama_lib.llama_model_default_params

    def without_extra_buffers() -> llama_lib.llama_model_params:
        params = default_params()
        params.use_extra_bufts = False
        return params

    llama_lib.llama_model_default_params = without_extra_buffers
    import llama_cpp.server.__main__ as server

    create_app = server.create_app
    server.create_app = lambda **settings: TextParts(create_app(**settings))
    server.main()


if __name__ == "__main__":
    main()
