"""Image parts: a data URL for vision models, dropped (and counted) for text-only ones."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from mmcurate.core.images import ImageStore
from mmcurate.models.accounting import CallCounter
from mmcurate.models.client import ModelClient, make_backend
from mmcurate.models.requests import ChatRequest


@pytest.fixture
def store(tmp_path) -> tuple[ImageStore, str, bytes]:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 3), (200, 10, 10)).save(buffer, format="PNG")
    images = ImageStore(tmp_path / "images")
    return images, images.put(buffer.getvalue()), buffer.getvalue()


def ask(ident: str, sha: str) -> ChatRequest:
    return ChatRequest(
        ident,
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": f"id={ident} fault=ok"},
                    {"type": "image", "sha256": sha},
                    {"type": "text", "text": "What is shown?"},
                ],
            }
        ],
        "vision.v1",
    )


def run(spec, images, cache, request):
    client = ModelClient(spec, make_backend(spec, images), cache, CallCounter())
    try:
        return client.chat([request], "s")[0]
    finally:
        client.close()


def test_vision_model_receives_data_url(fault_server, fault_spec, store, cache):
    images, sha, data = store
    response = run(fault_spec(vision=True), images, cache, ask("v", sha))
    assert response.text == "answer v" and response.images_dropped == 0
    content = fault_server.received[0][1]["messages"][0]["content"]
    assert [p["type"] for p in content] == ["text", "image_url", "text"]
    url = content[1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == data


def test_text_model_gets_no_image(fault_server, fault_spec, store, cache):
    images, sha, _ = store
    response = run(fault_spec(vision=False), images, cache, ask("t", sha))
    assert response.text == "answer t" and response.images_dropped == 1
    sent = fault_server.received[0][1]["messages"][0]["content"]
    assert sent == "id=t fault=ok\nWhat is shown?"
    again = run(fault_spec(vision=False), images, cache, ask("t", sha))
    assert again.cached and again.images_dropped == 1


def test_missing_image_fails_that_request_only(fault_server, fault_spec, store, cache):
    images, _, _ = store
    response = run(fault_spec(vision=True), images, cache, ask("m", "0" * 64))
    assert response.text is None and "not in the store" in response.error
    assert fault_server.received == []
