"""How many tokens a request will cost, counted before any model sees it.

No tokenizer is needed, so the count works for every model, offline. The rule:

- text: ``ceil(characters / 4)`` per text part or string content. OpenAI's rule of thumb
  for English ("one token is about four characters", help.openai.com, *What are tokens and
  how to count them?*); real tokenizers land within about 20% of it on English prose.
- chat framing: 3 tokens per message plus 3 that prime the reply, as counted for the
  GPT-4o family in the OpenAI cookbook (*How to count tokens with tiktoken*,
  ``num_tokens_from_messages``).
- an image part: ``ModelSpec.image_tokens`` for a vision model; nothing for a text-only
  model, whose client drops image parts before sending.

Completion tokens are the request's budget (``max_tokens`` of the request, else of the
model spec): an upper bound, used unless a release measured what the model really wrote.
"""

from __future__ import annotations

from mmcurate.core.config import ModelSpec
from mmcurate.models.requests import ChatRequest

CHARS_PER_TOKEN = 4
MESSAGE_TOKENS = 3
REPLY_TOKENS = 3
# the rule above as a plan's note says it (each plan adds how it sizes completions)
TOKEN_NOTE = (
    f"tokens: ~{CHARS_PER_TOKEN} characters per token, {MESSAGE_TOKENS} per message + {REPLY_TOKENS} "
    "for the reply, image_tokens per image (vision models)"
)


def text_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def prompt_tokens(request: ChatRequest, spec: ModelSpec) -> int:
    """Prompt tokens of ``request`` sent to ``spec`` (see the module docstring)."""
    total = REPLY_TOKENS
    for message in request.messages:
        total += MESSAGE_TOKENS
        content = message.get("content")
        if isinstance(content, str):
            total += text_tokens(content)
            continue
        for part in content or []:
            if part.get("type") == "image":
                total += spec.image_tokens if spec.vision else 0
            else:
                total += text_tokens(part.get("text", ""))
    return total


def completion_budget(request: ChatRequest, spec: ModelSpec) -> int:
    """The most tokens the model may write for ``request``."""
    return request.max_tokens if request.max_tokens is not None else spec.max_tokens
