"""vLLM offline: in-process ``vllm.LLM`` engines, each batch in one ``LLM.chat`` call.

One engine per model per process, whatever the number of shard tasks using it: every
backend of a process borrows its engine from ``ENGINES``, which builds it for the first
borrower, lets the others share it (one ``chat`` at a time: an engine is not thread-safe),
and frees it when the last borrower closes (engine deleted, garbage collected, model-parallel
groups destroyed, CUDA cache emptied). Another model's engine is built only once no backend
holds the current one, so model-major shards running in parallel never put two engines on
one GPU. A prompt that fails (too long, say) fails its own request only: the batch is then
retried one request at a time. vLLM is an optional extra.
"""

from __future__ import annotations

import gc
import json
import threading
import time
from collections.abc import Sequence
from typing import Any

from mmcurate.core.config import ModelSpec
from mmcurate.core.images import ImageStore
from mmcurate.models.backends.base import Backend, BackendError, OnResult, RequestError
from mmcurate.models.backends.messages import to_openai_messages
from mmcurate.models.requests import ChatRequest, ChatResponse, sampling


def import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise BackendError(
            f"backend vllm needs the vllm package ({exc}); install it with: pip install 'mmcurate[vllm]' "
            "(needs a CUDA GPU)"
        ) from None
    return vllm


def engine_kwargs(spec: ModelSpec) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"model": spec.model, "seed": spec.seed or 0}
    if spec.revision != "unversioned":
        kwargs["revision"] = spec.revision
    return {**kwargs, **spec.engine_args}


def sampling_kwargs(spec: ModelSpec, request: ChatRequest) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for one request (None values left out)."""
    return {k: v for k, v in sampling(spec, request).items() if v is not None}


def top_logprobs(token_logprobs: list[dict[int, Any]] | None) -> list[dict[str, float]] | None:
    """vLLM's per-token ``{token_id: Logprob}`` maps as ``{decoded token: logprob}``."""
    if token_logprobs is None:
        return None
    return [
        {(lp.decoded_token if lp.decoded_token is not None else str(tid)): lp.logprob for tid, lp in step.items()}
        for step in token_logprobs
    ]


def release_gpu() -> None:
    """Once an engine's last reference is gone: collect it, then clear vLLM's and CUDA's state."""
    gc.collect()
    try:
        from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel

        destroy_model_parallel()
        destroy_distributed_environment()
    except ImportError:
        pass
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass


class Engines:
    """The engine of this process (see the module docstring)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._key: str | None = None
        self._llm: Any = None
        self._borrowers = 0
        self.chat_lock = threading.Lock()  # one LLM.chat at a time

    def borrow(self, spec: ModelSpec) -> Any:
        key = json.dumps(engine_kwargs(spec), sort_keys=True, default=str)
        with self._changed:
            self._changed.wait_for(lambda: self._key in (None, key))
            if self._llm is None:
                self._llm = import_vllm().LLM(**engine_kwargs(spec))
                self._key = key
            self._borrowers += 1
            return self._llm

    def give_back(self) -> None:
        with self._changed:
            self._borrowers -= 1
            if self._borrowers == 0:
                self._llm, self._key = None, None  # the last reference (borrowers dropped theirs)
                release_gpu()
                self._changed.notify_all()


ENGINES = Engines()


class VLLMOfflineBackend(Backend):
    def __init__(self, spec: ModelSpec, images: ImageStore | None) -> None:
        self.spec = spec
        self.images = images
        self._vllm = import_vllm()
        self._llm = ENGINES.borrow(spec)

    def _chat(self, conversations: list[list[dict]], params: list[Any]) -> list[Any]:
        with ENGINES.chat_lock:
            return self._llm.chat(conversations, sampling_params=params, use_tqdm=False)

    def run(self, requests: Sequence[ChatRequest], on_result: OnResult) -> None:
        batch: list[tuple[int, list[dict], int]] = []
        for index, request in enumerate(requests):
            try:
                conversation, dropped = to_openai_messages(
                    request.messages, self.images, self.spec.vision, self.spec.image_max_side
                )
            except RequestError as exc:
                on_result(index, ChatResponse(request.key, self.spec.name, None, str(exc), False, 0.0))
                continue
            batch.append((index, conversation, dropped))
        if not batch:
            return
        params = [self._vllm.SamplingParams(**sampling_kwargs(self.spec, requests[i])) for i, _, _ in batch]
        started = time.perf_counter()
        try:
            outputs: list[Any] = self._chat([c for _, c, _ in batch], params)
        except Exception:  # noqa: BLE001 - some prompt broke the batch: find it, one request at a time
            outputs = []
            for (_, conversation, _), param in zip(batch, params):
                try:
                    outputs.append(self._chat([conversation], [param])[0])
                except Exception as exc:  # noqa: BLE001 - this prompt's own failure
                    outputs.append(exc)
        latency = (time.perf_counter() - started) / len(batch)  # amortised over the batch
        for (index, _, dropped), output in zip(batch, outputs):
            request = requests[index]
            if isinstance(output, Exception):
                on_result(
                    index,
                    ChatResponse(
                        request.key,
                        self.spec.name,
                        None,
                        f"vLLM failed on this prompt: {type(output).__name__}: {output}",
                        False,
                        latency,
                    ),
                )
                continue
            completion = output.outputs[0]
            on_result(
                index,
                ChatResponse(
                    key=request.key,
                    model=self.spec.name,
                    text=completion.text,
                    error=None,
                    cached=False,
                    latency=latency,
                    usage={
                        "prompt_tokens": len(output.prompt_token_ids or []),
                        "completion_tokens": len(completion.token_ids),
                    },
                    images_dropped=dropped,
                    top_logprobs=top_logprobs(completion.logprobs),
                ),
            )

    def close(self) -> None:
        if self._llm is not None:
            self._llm = None
            ENGINES.give_back()
