"""What a stage asks a model and what it gets back: the one currency of the model layer.

Messages use the OpenAI chat shape. A message's ``content`` is either a string or a list
of parts: ``{"type": "text", "text": ...}`` or ``{"type": "image", "sha256": <hex>}``.
Images are named by their sha256 in the ImageStore, so requests stay small, hash
stably for the response cache and carry no bytes until a backend resolves them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mmcurate.core.config import ModelSpec


@dataclass(frozen=True)
class ChatRequest:
    key: str  # caller's id, e.g. sample_id or f"{sample_id}/{context_id}"
    messages: list[dict]
    template: str  # prompt-template version, e.g. "gate.parametric.v1" (enters the cache key)
    max_tokens: int | None = None  # overrides spec.max_tokens
    logprobs: int | None = None  # top-N logprobs of the generated tokens


@dataclass
class ChatResponse:
    key: str
    model: str  # ModelSpec.name
    text: str | None  # None when the request failed for good
    error: str | None  # why it failed (after retries); never counted as an answer
    cached: bool
    latency: float  # seconds of the model call (for a cache hit: of the original call)
    usage: dict[str, Any] = field(default_factory=dict)
    images_dropped: int = 0  # image parts left out because spec.vision is False
    top_logprobs: list[dict[str, float]] | None = None  # per generated token, when asked

    @property
    def ok(self) -> bool:
        return self.text is not None


def text_of(messages: list[dict]) -> str:
    """The text parts of all messages, joined by newlines (image parts are skipped)."""
    chunks: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            chunks.append(content)
        elif isinstance(content, list):
            chunks.extend(p.get("text", "") for p in content if p.get("type") == "text")
    return "\n".join(chunks)


def sampling(spec: ModelSpec, request: ChatRequest) -> dict[str, Any]:
    """The sampling parameters of one call: the spec's, with the request's overrides."""
    return {
        "temperature": spec.temperature,
        "top_p": spec.top_p,
        "repetition_penalty": spec.repetition_penalty,
        "max_tokens": request.max_tokens if request.max_tokens is not None else spec.max_tokens,
        "seed": spec.seed,
        "logprobs": request.logprobs,
    }
