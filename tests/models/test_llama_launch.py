"""``llama_launch``'s request adapter, on a stub ASGI app: a chat request's text-only content lists
reach the server as the strings mmcurate's own backend sends (issue 42 item 1)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mmcurate.models.backends.llama_launch import TextParts
from mmcurate.models.backends.messages import to_openai_messages

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}


def _through(path: str, body: bytes, chunk: int = 7) -> tuple[dict[str, Any], bytes]:
    """What the wrapped app receives (scope, whole body) for a POST sent in chunks of ``chunk`` bytes."""
    seen: dict[str, Any] = {}

    async def app(scope, receive, send) -> None:
        parts, more = [], True
        while more:
            message = await receive()
            parts.append(message["body"])
            more = message.get("more_body", False)
        seen["scope"], seen["body"] = scope, b"".join(parts)

    pieces = [body[i : i + chunk] for i in range(0, len(body), chunk)] or [b""]
    messages = [{"type": "http.request", "body": p, "more_body": n < len(pieces) - 1} for n, p in enumerate(pieces)]

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message) -> None:
        raise AssertionError("the stub answers nothing")

    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
    }
    asyncio.run(TextParts(app)(scope, receive, send))
    return seen["scope"], seen["body"]


def test_text_parts_reach_the_server_as_the_string_mmcurate_sends():
    ours = [
        {"role": "system", "content": [{"type": "text", "text": "Answer briefly."}]},
        {"role": "user", "content": [{"type": "text", "text": "Evidence: a."}, {"type": "text", "text": "Question?"}]},
    ]
    lmms_eval = {"model": "m", "max_tokens": 8, "messages": ours}
    scope, body = _through("/v1/chat/completions", json.dumps(lmms_eval).encode())
    assert json.loads(body) == {**lmms_eval, "messages": to_openai_messages(ours, None, vision=False)[0]}
    assert json.loads(body)["messages"][0]["content"] == "Answer briefly."
    assert dict(scope["headers"])[b"content-length"] == str(len(body)).encode()


def test_other_requests_pass_unchanged():
    with_image = json.dumps({"messages": [{"role": "user", "content": [{"type": "text", "text": "What?"}, IMAGE]}]})
    for path, body in (
        ("/v1/chat/completions", with_image.encode()),
        ("/v1/chat/completions", b"not json"),
        ("/v1/completions", json.dumps({"prompt": [{"type": "text", "text": "x"}]}).encode()),
    ):
        assert _through(path, body)[1] == body
