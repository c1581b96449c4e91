"""vLLM offline: one in-process ``vllm.LLM`` per model, each batch in one ``LLM.chat`` call.

The engine is built when the backend opens and freed on ``close()`` (engine deleted,
garbage collected, CUDA cache emptied, model-parallel groups destroyed), so the next
model in a model-major run gets the whole GPU. vLLM is an optional extra.
"""
from __future__ import annotations

import gc
import time
from typing import Any, Sequence

from mmcurate.core.config import ModelSpec
from mmcurate.core.images import ImageStore

from ..requests import ChatRequest, ChatResponse, sampling
from .base import Backend, BackendError, OnResult, RequestError
from .messages import to_openai_messages


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


class VLLMOfflineBackend(Backend):
    def __init__(self, spec: ModelSpec, images: ImageStore | None) -> None:
        self.spec = spec
        self.images = images
        self._vllm = import_vllm()
        self._llm = self._vllm.LLM(**engine_kwargs(spec))

    def run(self, requests: Sequence[ChatRequest], on_result: OnResult) -> None:
        batch: list[tuple[int, list[dict], int]] = []
        for index, request in enumerate(requests):
            try:
                conversation, dropped = to_openai_messages(request.messages, self.images, self.spec.vision)
            except RequestError as exc:
                on_result(index, ChatResponse(request.key, self.spec.name, None, str(exc), False, 0.0))
                continue
            batch.append((index, conversation, dropped))
        if not batch:
            return
        params = [self._vllm.SamplingParams(**sampling_kwargs(self.spec, requests[i])) for i, _, _ in batch]
        started = time.perf_counter()
        outputs = self._llm.chat([c for _, c, _ in batch], sampling_params=params, use_tqdm=False)
        latency = (time.perf_counter() - started) / len(batch)  # amortised over the batch
        for (index, _, dropped), output in zip(batch, outputs):
            completion = output.outputs[0]
            on_result(index, ChatResponse(
                key=requests[index].key, model=self.spec.name, text=completion.text, error=None,
                cached=False, latency=latency,
                usage={
                    "prompt_tokens": len(output.prompt_token_ids or []),
                    "completion_tokens": len(completion.token_ids),
                },
                images_dropped=dropped, top_logprobs=top_logprobs(completion.logprobs),
            ))

    def close(self) -> None:
        if getattr(self, "_llm", None) is None:
            return
        del self._llm
        self._llm = None
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
