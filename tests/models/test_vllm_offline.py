"""vLLM offline without vLLM: the import guard, engine/sampling arguments, chat inputs, and
run/close on a fake ``vllm`` module that records what the backend asks of it."""

from __future__ import annotations

import base64
import importlib.util
import io
import sys
import threading
import types
import weakref
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from PIL import Image

from mmcurate.core.config import ModelSpec
from mmcurate.core.images import ImageStore
from mmcurate.models.backends import vllm_offline
from mmcurate.models.backends.base import BackendError
from mmcurate.models.backends.messages import to_openai_messages
from mmcurate.models.backends.vllm_offline import (
    VLLMOfflineBackend,
    engine_kwargs,
    sampling_kwargs,
    top_logprobs,
)
from mmcurate.models.requests import ChatRequest, text_of

PATIENCE = 60.0  # seconds: only ever waited in full if something is broken
SPEC = ModelSpec(
    name="qwen",
    backend="vllm",
    model="Qwen/Qwen2.5-VL-7B-Instruct",
    revision="abc123",
    vision=True,
    temperature=0.0,
    max_tokens=64,
    seed=7,
    engine_args={"max_model_len": 4096, "limit_mm_per_prompt": {"image": 2}},
)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_missing_vllm_names_the_fix():
    with pytest.raises(BackendError, match=r"pip install 'mmcurate\[vllm\]'"):
        VLLMOfflineBackend(SPEC, None)


def test_engine_and_sampling_arguments():
    assert engine_kwargs(SPEC) == {
        "model": "Qwen/Qwen2.5-VL-7B-Instruct",
        "seed": 7,
        "revision": "abc123",
        "max_model_len": 4096,
        "limit_mm_per_prompt": {"image": 2},
    }
    unversioned = SPEC.model_copy(update={"revision": "unversioned", "seed": None})
    assert "revision" not in engine_kwargs(unversioned) and engine_kwargs(unversioned)["seed"] == 0
    request = ChatRequest("k", [{"role": "user", "content": "hi"}], "t", max_tokens=8, logprobs=5)
    assert sampling_kwargs(SPEC, request) == {
        "temperature": 0.0,
        "top_p": 1.0,
        "repetition_penalty": 1.05,
        "max_tokens": 8,
        "seed": 7,
        "logprobs": 5,
    }
    plain = ChatRequest("k", [{"role": "user", "content": "hi"}], "t")
    assert sampling_kwargs(SPEC.model_copy(update={"seed": None}), plain) == {
        "temperature": 0.0,
        "top_p": 1.0,
        "repetition_penalty": 1.05,
        "max_tokens": 64,
    }


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


@pytest.mark.parametrize(
    "fmt, size, sent_as, sent_size",
    [
        ("JPEG", (1024, 600), "jpeg", (512, 300)),
        ("PNG", (300, 900), "png", (171, 512)),
        ("JPEG", (400, 300), "jpeg", (400, 300)),
    ],
)
def test_images_longer_than_the_max_side_are_downscaled_before_they_are_sent(tmp_path, fmt, size, sent_as, sent_size):
    # RefLVQA (seed 004, C.2): "rescaled such that the maximum dimension ... did not exceed 512 pixels"
    buffer = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(buffer, format=fmt)
    images = ImageStore(tmp_path)
    sha = images.put(buffer.getvalue())
    messages = [{"role": "user", "content": [{"type": "image", "sha256": sha}, {"type": "text", "text": "?"}]}]
    conversation, _ = to_openai_messages(messages, images, vision=True, max_side=512)
    prefix, payload = conversation[0]["content"][0]["image_url"]["url"].split(",", 1)
    assert prefix == f"data:image/{sent_as};base64"
    assert Image.open(io.BytesIO(base64.b64decode(payload))).size == sent_size
    if size == sent_size:  # an image that fits is sent as stored
        assert base64.b64decode(payload) == buffer.getvalue()


@dataclass
class Logprob:  # the shape of vllm.sequence.Logprob
    logprob: float
    decoded_token: str | None


def test_logprobs_are_keyed_by_decoded_token():
    steps = [{11: Logprob(-0.1, "A"), 12: Logprob(-2.3, "B")}, {13: Logprob(-0.5, None)}]
    assert top_logprobs(steps) == [{"A": -0.1, "B": -2.3}, {"13": -0.5}]
    assert top_logprobs(None) is None


# ---------------------------------------------------------------- run/close on a recording fake vllm


class FakeVLLM:
    """Stands in for the ``vllm`` package: records engines built, chat calls and teardown."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.engines: list[weakref.ref] = []
        fake = self

        class LLM:
            def __init__(self, **kwargs: object) -> None:
                fake.events.append(("build", kwargs["model"]))
                fake.engines.append(weakref.ref(self))
                self.model = kwargs["model"]

            def chat(self, conversations, sampling_params, use_tqdm):
                fake.events.append(("chat", self.model, len(conversations)))
                texts = [text_of(c) for c in conversations]
                if any("FAIL" in t for t in texts):
                    raise ValueError("prompt is longer than max_model_len")
                return [
                    SimpleNamespace(
                        prompt_token_ids=[1, 2, 3],
                        outputs=[
                            SimpleNamespace(text=f"{self.model} says {t.split()[-1]}", token_ids=[7, 8], logprobs=None)
                        ],
                    )
                    for t in texts
                ]

        class SamplingParams:
            def __init__(self, **kwargs: object) -> None:
                self.kwargs = kwargs

        self.module = types.ModuleType("vllm")
        self.module.LLM, self.module.SamplingParams = LLM, SamplingParams
        self.parallel_state = types.ModuleType("vllm.distributed.parallel_state")
        self.parallel_state.destroy_model_parallel = lambda: fake.events.append(("destroy_model_parallel",))
        self.parallel_state.destroy_distributed_environment = lambda: fake.events.append(("destroy_environment",))

    def install(self, monkeypatch) -> None:
        monkeypatch.setitem(sys.modules, "vllm", self.module)
        monkeypatch.setitem(sys.modules, "vllm.distributed", types.ModuleType("vllm.distributed"))
        monkeypatch.setitem(sys.modules, "vllm.distributed.parallel_state", self.parallel_state)
        monkeypatch.setattr(vllm_offline, "ENGINES", vllm_offline.Engines())


@pytest.fixture
def fake_vllm(monkeypatch) -> FakeVLLM:
    fake = FakeVLLM()
    fake.install(monkeypatch)
    return fake


def ask(key: str, text: str, image: str | None = None) -> ChatRequest:
    content = [{"type": "text", "text": text}] + ([{"type": "image", "sha256": image}] if image else [])
    return ChatRequest(key, [{"role": "user", "content": content}], "t")


def test_one_failed_prompt_fails_only_its_own_request(fake_vllm, tmp_path):
    backend = VLLMOfflineBackend(SPEC, ImageStore(tmp_path))
    results: dict[int, object] = {}
    backend.run(
        [
            ask("a", "hello alpha"),
            ask("b", "FAIL beta"),
            ask("c", "hello gamma"),
            ask("d", "with picture", image="00" * 32),
        ],
        lambda i, r: results.__setitem__(i, r),
    )
    assert results[0].text == f"{SPEC.model} says alpha" and results[2].text == f"{SPEC.model} says gamma"
    assert results[0].usage == {"prompt_tokens": 3, "completion_tokens": 2}
    assert results[1].text is None and "vLLM failed on this prompt: ValueError" in results[1].error
    assert results[3].text is None and "00000000" in results[3].error  # image not in the store: never sent
    # the batch of three failed as a whole, then each prompt alone found the broken one
    assert [e for e in fake_vllm.events if e[0] == "chat"] == [("chat", SPEC.model, 3)] + [("chat", SPEC.model, 1)] * 3
    backend.close()
    assert fake_vllm.engines[0]() is None  # the engine was freed
    assert ("destroy_model_parallel",) in fake_vllm.events and ("destroy_environment",) in fake_vllm.events


class WatchedCondition(threading.Condition):
    """A condition that says when a thread starts waiting on it."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting.set()
        return super().wait(timeout)


def test_shards_share_one_engine_per_model_and_another_model_waits_for_it(fake_vllm, monkeypatch):
    changed = WatchedCondition()  # what the engines wait on for another model's engine to go
    monkeypatch.setattr(vllm_offline, "threading", SimpleNamespace(Condition=lambda: changed, Lock=threading.Lock))
    monkeypatch.setattr(vllm_offline, "ENGINES", vllm_offline.Engines())
    other = SPEC.model_copy(update={"name": "other", "model": "Other/Model"})
    first, second = VLLMOfflineBackend(SPEC, None), VLLMOfflineBackend(SPEC, None)  # two shards, one model
    assert [e for e in fake_vllm.events if e[0] == "build"] == [("build", SPEC.model)]
    assert not changed.waiting.is_set()  # the same model's second shard did not wait
    waiting = threading.Thread(target=lambda: VLLMOfflineBackend(other, None).close())
    waiting.start()
    assert changed.waiting.wait(PATIENCE)  # the other model's shard is blocked, not building
    assert waiting.is_alive() and [e for e in fake_vllm.events if e[0] == "build"] == [("build", SPEC.model)]
    first.close()
    assert fake_vllm.engines[0]() is not None  # still borrowed by the second shard
    second.close()
    waiting.join(timeout=PATIENCE)
    assert not waiting.is_alive()
    builds = [e for e in fake_vllm.events if e[0] in ("build", "destroy_model_parallel")]
    assert builds == [
        ("build", SPEC.model),
        ("destroy_model_parallel",),
        ("build", "Other/Model"),
        ("destroy_model_parallel",),
    ]
