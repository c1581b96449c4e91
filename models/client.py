"""The one way stages call models: ``ModelPool.client(name).chat(requests, stage)``.

A client answers from the response cache first and sends only the misses to its
backend; each finished call is written to the cache at once and counted per stage.
Identical requests in one batch are sent once; the others count as cache hits (they are
answered from the cached answer), so every answered request is a call or a cache hit. A
``progress`` callback hears how many of a batch's requests are answered (at the start, then in
about ten steps), for long stages.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from mmcurate.core.config import ModelSpec, Settings
from mmcurate.core.errors import ConfigError
from mmcurate.core.images import ImageStore
from mmcurate.core.interrupt import raise_if_stopped
from mmcurate.models.accounting import CallCounter
from mmcurate.models.backends.base import Backend
from mmcurate.models.backends.embedded import EmbeddedBackend
from mmcurate.models.backends.openai_compat import OPENAI_URL, OpenAICompatBackend
from mmcurate.models.backends.scripted import ScriptedBackend
from mmcurate.models.backends.vllm_offline import VLLMOfflineBackend
from mmcurate.models.cache import ResponseCache, cache_key
from mmcurate.models.requests import ChatRequest, ChatResponse

log = logging.getLogger(__name__)

SecretLoader = Callable[[str], str]  # secret block name -> value; raises KeyError when unknown
Progress = Callable[[str, str, int, int], None]  # (stage, model, answered, planned)
PROGRESS_STEPS = 10  # a batch reports its progress at most this many times (plus its start)


def resolve_api_key(spec: ModelSpec, secrets: SecretLoader | None = None) -> str | None:
    """The model's API key from its environment variable or a named secret block (or None).

    Secret blocks are read through ``secrets``, which the orchestration layer supplies
    (``tasks.models`` reads Prefect Secret blocks); library code never imports Prefect."""
    if spec.api_key_env:
        key = os.environ.get(spec.api_key_env)
        if not key:
            raise ConfigError(f"model {spec.name}: environment variable {spec.api_key_env} is not set")
        return key
    if spec.api_key_block:
        if secrets is None:
            raise ConfigError(
                f"model {spec.name}: secret block {spec.api_key_block!r} needs a secret loader "
                "(run it through a flow, or set api_key_env)"
            )
        try:
            return secrets(spec.api_key_block)
        except KeyError:
            raise ConfigError(f"model {spec.name}: secret block {spec.api_key_block!r} not found") from None
    return None


SAMPLING = ("temperature", "top_p", "repetition_penalty")  # what an evaluation's decoding settings set


def penalty_field(spec: ModelSpec) -> str | None:
    """The request field of an ``openai`` model's repetition penalty: api.openai.com rejects unknown
    sampling fields (None: not sent); vLLM and other servers at a ``base_url`` take this one."""
    return "repetition_penalty" if spec.base_url else None


def unapplied_sampling(spec: ModelSpec) -> dict[str, str]:
    """The sampling parameters of ``SAMPLING`` that the model's backend does not apply, each with why."""
    if spec.backend == "scripted":
        return dict.fromkeys(SAMPLING, "a scripted model answers by its rules and does not sample")
    if spec.backend == "openai" and penalty_field(spec) is None:
        return {"repetition_penalty": "api.openai.com rejects the field, so it is not sent"}
    return {}


def make_backend(spec: ModelSpec, images: ImageStore | None, secrets: SecretLoader | None = None) -> Backend:
    if spec.backend == "openai":
        return OpenAICompatBackend(
            spec,
            images,
            spec.base_url or OPENAI_URL,
            resolve_api_key(spec, secrets),
            spec.model,
            penalty_field=penalty_field(spec),
        )
    if spec.backend == "embedded":
        return EmbeddedBackend(spec, images)
    if spec.backend == "vllm":
        return VLLMOfflineBackend(spec, images)
    return ScriptedBackend(spec)


class ModelClient:
    def __init__(
        self,
        spec: ModelSpec,
        backend: Backend,
        cache: ResponseCache,
        counter: CallCounter,
        progress: Progress | None = None,
    ) -> None:
        self.spec = spec
        self.backend = backend
        self.cache = cache
        self.counter = counter
        self.progress = progress

    def chat(self, requests: list[ChatRequest], stage: str) -> list[ChatResponse]:
        """Answer ``requests`` in order: cache hits first, then one backend batch for the misses
        (none once the run is interrupted: ``core.interrupt``)."""
        raise_if_stopped()
        keys = [cache_key(self.spec, r, self.backend.identity) for r in requests]
        hits = self.cache.get_many(keys)
        results: list[ChatResponse | None] = [None] * len(requests)
        waiting: dict[str, list[int]] = {}  # cache key -> positions wanting that answer
        for position, (request, key) in enumerate(zip(requests, keys)):
            hit = hits.get(key)
            if hit is not None:
                results[position] = ChatResponse(
                    key=request.key,
                    model=self.spec.name,
                    text=hit.text,
                    error=None,
                    cached=True,
                    latency=hit.latency,
                    usage=hit.usage,
                    top_logprobs=hit.top_logprobs,
                    images_dropped=self._images_dropped(request),
                )
                self.counter.record(stage, self.spec.name, cached=True, failed=False)
            else:
                waiting.setdefault(key, []).append(position)
        if not waiting:
            return results  # type: ignore[return-value]
        misses = [requests[positions[0]] for positions in waiting.values()]
        miss_keys = list(waiting)
        answered = len(requests) - sum(len(positions) for positions in waiting.values())
        step = max(1, len(requests) // PROGRESS_STEPS)
        if self.progress is not None:
            self.progress(stage, self.spec.name, answered, len(requests))

        def on_result(index: int, response: ChatResponse) -> None:
            nonlocal answered
            key = miss_keys[index]
            if response.text is not None:
                self.cache.put(
                    key,
                    self.spec.name,
                    misses[index].template,
                    response.text,
                    response.usage,
                    response.latency,
                    response.top_logprobs,
                )
            self.counter.record(stage, self.spec.name, cached=False, failed=response.text is None, usage=response.usage)
            if response.text is not None:  # the identical requests of the batch: answered from what was just cached
                for _ in waiting[key][1:]:
                    self.counter.record(stage, self.spec.name, cached=True, failed=False)
            for position in waiting[key]:
                results[position] = _with_key(response, requests[position].key)
            before, answered = answered, answered + len(waiting[key])
            if self.progress is not None and (answered // step > before // step or answered == len(requests)):
                self.progress(stage, self.spec.name, answered, len(requests))

        log.info("%s: %d cached, %d to %s", stage, len(requests) - len(misses), len(misses), self.spec.name)
        self.backend.run(misses, on_result)
        return results  # type: ignore[return-value]

    def _images_dropped(self, request: ChatRequest) -> int:
        if self.spec.vision:
            return 0
        return sum(
            1
            for m in request.messages
            if isinstance(m.get("content"), list)
            for p in m["content"]
            if p.get("type") == "image"
        )

    def close(self) -> None:
        self.backend.close()


def _with_key(response: ChatResponse, key: str) -> ChatResponse:
    return response if response.key == key else replace(response, key=key)


@dataclass(eq=False, repr=False)  # compared and shown as itself, as before
class ModelPool:
    """Opens clients lazily and keeps them until released.

    vLLM engines hold the GPU, so opening one releases any other open vLLM client first;
    ``schedule.model_major`` releases each model after its batch, so model-major runs
    hold one gating model at a time (plus the judge, if it is a model).
    """

    settings: Settings
    cache: ResponseCache
    images: ImageStore | None
    counter: CallCounter
    secrets: SecretLoader | None = None
    progress: Progress | None = None
    _open: dict[str, ModelClient] = field(default_factory=dict, init=False)

    def client(self, name: str) -> ModelClient:
        if name not in self._open:
            spec = self.settings.model(name)
            if spec.backend == "vllm":
                for other in [n for n, c in self._open.items() if c.spec.backend == "vllm"]:
                    self.release(other)
            self._open[name] = ModelClient(
                spec, make_backend(spec, self.images, self.secrets), self.cache, self.counter, self.progress
            )
        return self._open[name]

    @property
    def opened(self) -> list[str]:
        return list(self._open)

    def release(self, name: str) -> None:
        client = self._open.pop(name, None)
        if client is not None:
            client.close()

    def close(self) -> None:
        for name in list(self._open):
            self.release(name)

    def __enter__(self) -> ModelPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
