"""vLLM offline without vLLM: the import guard, engine/sampling arguments, chat inputs."""
from __future__ import annotations

import base64
import importlib.util
import io
from dataclasses import dataclass

import pytest
from PIL import Image

from mmcurate.core.config import ModelSpec
from mmcurate.core.images import ImageStore
from mmcurate.gating.backends.base import BackendError
from mmcurate.gating.backends.messages import to_openai_messages
from mmcurate.gating.backends.vllm_offline import (
    VLLMOfflineBackend, engine_kwargs, sampling_kwargs, top_logprobs,
)
from mmcurate.gating.requests import ChatRequest

SPEC = ModelSpec(name="qwen", backend="vllm", model="Qwen/Qwen2.5-VL-7B-Instruct", revision="abc123",
                 vision=True, temperature=0.0, max_tokens=64, seed=7,
                 engine_args={"max_model_len": 4096, "limit_mm_per_prompt": {"image": 2}})


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_missing_vllm_names_the_fix():
    with pytest.raises(BackendError, match=r"pip install 'mmcurate\[vllm\]'"):
        VLLMOfflineBackend(SPEC, None)


def test_engine_and_sampling_arguments():
    assert engine_kwargs(SPEC) == {"model": "Qwen/Qwen2.5-VL-7B-Instruct", "seed": 7, "revision": "abc123",
                                   "max_model_len": 4096, "limit_mm_per_prompt": {"image": 2}}
    unversioned = SPEC.model_copy(update={"revision": "unversioned", "seed": None})
    assert "revision" not in engine_kwargs(unversioned) and engine_kwargs(unversioned)["seed"] == 0
    request = ChatRequest("k", [{"role": "user", "content": "hi"}], "t", max_tokens=8, logprobs=5)
    assert sampling_kwargs(SPEC, request) == {"temperature": 0.0, "top_p": 1.0, "repetition_penalty": 1.05,
                                              "max_tokens": 8, "seed": 7, "logprobs": 5}
    plain = ChatRequest("k", [{"role": "user", "content": "hi"}], "t")
    assert sampling_kwargs(SPEC.model_copy(update={"seed": None}), plain) == {
        "temperature": 0.0, "top_p": 1.0, "repetition_penalty": 1.05, "max_tokens": 64}


def test_conversation_with_images(tmp_path):
    buffer = io.BytesIO()
    Image.new("L", (2, 2)).save(buffer, format="JPEG")
    images = ImageStore(tmp_path)
    sha = images.put(buffer.getvalue())
    messages = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": [{"type": "image", "sha256": sha}, {"type": "text", "text": "What is it?"}]},
    ]
    conversation, dropped = to_openai_messages(messages, images, vision=True)
    assert dropped == 0 and conversation[0] == messages[0]
    image_part, text_part = conversation[1]["content"]
    assert text_part == {"type": "text", "text": "What is it?"}
    prefix, payload = image_part["image_url"]["url"].split(",", 1)
    assert prefix == "data:image/jpeg;base64" and base64.b64decode(payload) == buffer.getvalue()
    text_only, dropped = to_openai_messages(messages, images, vision=False)
    assert dropped == 1 and text_only[1] == {"role": "user", "content": "What is it?"}


@dataclass
class Logprob:  # the shape of vllm.sequence.Logprob
    logprob: float
    decoded_token: str | None


def test_logprobs_are_keyed_by_decoded_token():
    steps = [{11: Logprob(-0.1, "A"), 12: Logprob(-2.3, "B")}, {13: Logprob(-0.5, None)}]
    assert top_logprobs(steps) == [{"A": -0.1, "B": -2.3}, {"13": -0.5}]
    assert top_logprobs(None) is None
