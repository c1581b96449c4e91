"""Structured replies read by the labels rule: strict parse, one retry, then a counted error.

``ask_labels`` reads one word from a closed set; ``ask_parsed`` is the same rule for any
reply with a fixed shape ("Score: 7 / Feedback: ...", "Logic: 4 / Visual: 2", a list of
objects, a Molmo point): the caller's parser of each request returns the value or None
(a parser may know its request, e.g. the ground truth a reply must not reveal), an unreadable
first reply is asked again once with a reminder (``labels.retry_request``, so the retry
has its own cache key), and a second unreadable reply, or a call that failed for good, is
an error. A parse never guesses: None is the only way to say "cannot read this".
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .labels import retry_request
from .requests import ChatRequest

T = TypeVar("T")


@dataclass(frozen=True)
class Parsed(Generic[T]):
    """A strictly parsed reply: ``value`` None means error (see ``error``)."""

    value: T | None
    raw: list[str | None]  # the reply of each attempt
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None


def ask_parsed(
    client: Any,  # gating.client.ModelClient
    requests: list[ChatRequest],
    parsers: Sequence[Callable[[str], T | None]],
    reminder: str,
    stage: str,
    expected: str,
) -> list[Parsed[T]]:
    """Ask ``requests`` and read each reply with its parser (``parsers[i]`` reads the reply
    to ``requests[i]``; see the module docstring); ``expected`` names the shape in errors."""
    if len(parsers) != len(requests):
        raise ValueError(f"ask_parsed needs one parser per request, got {len(parsers)} for {len(requests)}")
    if not requests:
        return []
    first = client.chat(requests, stage)
    out: list[Parsed[T] | None] = [None] * len(requests)
    retry: list[int] = []
    for i, response in enumerate(first):
        if response.text is None:
            out[i] = Parsed(None, [None], f"model call failed: {response.error}")
            continue
        value = parsers[i](response.text)
        if value is None:
            retry.append(i)
        else:
            out[i] = Parsed(value, [response.text], None)
    if retry:
        second = client.chat([retry_request(requests[i], first[i].text, reminder) for i in retry], stage)
        for i, response in zip(retry, second):
            raw = [first[i].text, response.text]
            if response.text is None:
                out[i] = Parsed(None, raw, f"retry failed: {response.error}")
                continue
            value = parsers[i](response.text)
            out[i] = Parsed(value, raw, None) if value is not None else Parsed(None, raw, f"unparsable reply (expected {expected})")
    return out  # type: ignore[return-value]
