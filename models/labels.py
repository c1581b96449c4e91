"""The one way a model's reply becomes a label: strict parsing, one retry, then an error.

Every check that asks a model for a closed-set answer (the judge's grade, yes/no entailment,
right/wrong, fact-checkable yes/no) goes through ``ask_labels``:

1. When the backend returned top logprobs and the caller allows it, the first generated
   token decides (``first_token_label``): the label whose spellings carry more probability
   there, with its share of the labels' mass as the score. This reads a tiny model's intent
   even when its text rambles, without accepting free text.
2. Otherwise the reply must be exactly one label (``strict_label``): only case, surrounding
   whitespace, quotes, backticks, markdown emphasis and one final full stop or exclamation
   mark are tolerated. ``"Right."`` is right; ``"right, because ..."`` is nothing.
3. An unreadable reply gets one retry: the conversation continued with a reminder (a
   different template id, so a different cache key). A second unreadable reply, or a call
   that failed after the client's own retries, is an error: counted, never a label.

``ask_parsed`` is the same rule for any closed-set reply with its own strict reader (a
rating, an answer whose citations must name shown documents): ``parse(text)`` returns the
value or None, never a guess; ``ask_labels`` is ``ask_parsed`` with ``strict_label``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from mmcurate.core.errors import MmcurateError
from mmcurate.models.requests import ChatRequest, ChatResponse

RETRY_SUFFIX = "+retry1"
LABEL_LOGPROBS = 5  # top tokens asked for, so a label can be read from the first token
LABEL_MAX_TOKENS = 8  # a label is one word; a short reply also keeps logprob computation cheap

Labels = Sequence[str] | Mapping[str, str]  # the labels, or accepted spelling -> label


def _spellings(labels: Labels) -> Mapping[str, str]:
    if isinstance(labels, Mapping):
        return {" ".join(k.lower().split()): v for k, v in labels.items()}
    return {label.lower(): label for label in labels}


def strict_label(text: str | None, labels: Labels) -> str | None:
    """``text`` as one of ``labels`` when it is exactly one of their spellings, else None.

    ``labels`` is a list of labels (each its own spelling, any case) or a mapping from
    accepted spellings to labels (e.g. ``{"a": "CORRECT", "correct": "CORRECT"}``).
    """
    if text is None:
        return None
    word = text.strip().strip("*_`\"'").strip()
    if word[-1:] in (".", "!"):
        word = word[:-1]
    word = word.strip().strip("*_`\"'").strip().lower()
    return _spellings(labels).get(re.sub(r"\s+", " ", word))


def first_token_label(response: ChatResponse, labels: Sequence[str]) -> tuple[str, float] | None:
    """The label whose first token carries more probability among the first generated
    token's top logprobs, with its share of the labels' mass; None when no label appears."""
    top = response.top_logprobs
    if not top:
        return None
    mass = dict.fromkeys(labels, 0.0)
    for token, logprob in top[0].items():
        word = token.strip().strip("\"'*_.").lower()
        if word in mass and logprob is not None:
            mass[word] += math.exp(logprob)
    total = sum(mass.values())
    if total <= 0:
        return None
    best = max(labels, key=lambda label: mass[label])
    return best, mass[labels[0]] / total


@dataclass(frozen=True)
class Label:
    """A strictly parsed model reply: ``label`` None means error (see ``error``). For
    ``ask_labels`` the value is one of the labels; for ``ask_parsed`` whatever ``parse`` returns."""

    label: Any
    raw: list[str | None]  # the answer of each attempt
    error: str | None
    cached: bool = False
    score: float | None = None  # e.g. P(yes) / (P(yes) + P(no)) when decided from logprobs
    seconds: float = 0.0  # the model calls' latency, every attempt (a cache hit: its original call's)

    @property
    def ok(self) -> bool:
        return self.label is not None


Decide = Callable[[ChatResponse], "tuple[str, float] | None"]


def ask_labels(
    client: Any,  # models.client.ModelClient
    requests: list[ChatRequest],
    labels: Labels,
    reminder: str,
    stage: str,
    decide: Decide | None = None,
) -> list[Label]:
    """Ask ``requests`` and read one label from each reply (see the module docstring).

    ``decide(response)`` may settle a first reply before its text is parsed (e.g. from
    token logprobs); returning None falls back to the text."""
    names = list(dict.fromkeys(_spellings(labels).values()))
    return ask_parsed(
        client, requests, lambda text: strict_label(text, labels), reminder, stage, "/".join(names), decide
    )


class RecordError(MmcurateError):
    """A reply that is not the record asked for; says why (raised by a reply parser)."""


def _read(parse: Callable[[str], Any], text: str) -> tuple[Any, str | None]:
    """(value, None), or (None, the reason a parser raised), or (None, None): unreadable."""
    try:
        return parse(text), None
    except RecordError as exc:
        return None, str(exc)


def ask_parsed(
    client: Any,  # models.client.ModelClient
    requests: list[ChatRequest],
    parse: Callable[[str], Any] | Sequence[Callable[[str], Any]],
    reminder: str,
    stage: str,
    expected: str,
    decide: Decide | None = None,
) -> list[Label]:
    """Ask ``requests`` and read each reply with ``parse``: one retry with ``reminder``, then
    an error saying what was ``expected``. Never a guessed value.

    ``parse`` is one reader for every reply, or one per request (a reader may know its
    request: the evidence a verifier record may cite, the ground truth a reply must not
    reveal). A reader returns the value, or None (unreadable), or raises ``RecordError``
    with the reason, which the retry's reminder and the error then name."""
    parsers = [parse] * len(requests) if callable(parse) else list(parse)
    if len(parsers) != len(requests):
        raise ValueError(f"ask_parsed needs one parser per request, got {len(parsers)} for {len(requests)}")
    if not requests:
        return []
    first = client.chat(requests, stage)
    out: list[Label | None] = [None] * len(requests)
    retry: list[tuple[int, str | None]] = []
    for i, response in enumerate(first):
        decided = decide(response) if decide is not None and response.text is not None else None
        if response.text is None:
            out[i] = Label(None, [None], f"model call failed: {response.error}", seconds=response.latency)
        elif decided is not None:
            out[i] = Label(decided[0], [response.text], None, response.cached, decided[1], response.latency)
        else:
            value, problem = _read(parsers[i], response.text)
            if value is not None:
                out[i] = Label(value, [response.text], None, response.cached, seconds=response.latency)
            else:
                retry.append((i, problem))
    if retry:
        second = client.chat(
            [
                _retry_request(
                    requests[i], first[i].text, reminder if problem is None else f"{reminder} (Problem: {problem}.)"
                )
                for i, problem in retry
            ],
            stage,
        )
        for (i, _), response in zip(retry, second):
            raw = [first[i].text, response.text]
            seconds = first[i].latency + response.latency
            if response.text is None:
                out[i] = Label(None, raw, f"retry failed: {response.error}", seconds=seconds)
                continue
            value, problem = _read(parsers[i], response.text)
            if value is not None:
                out[i] = Label(value, raw, None, seconds=seconds)
            elif problem is not None:
                out[i] = Label(None, raw, f"invalid reply: {problem}", seconds=seconds)
            else:
                out[i] = Label(None, raw, f"unparsable answer (expected {expected})", seconds=seconds)
    return out  # type: ignore[return-value]


def _retry_request(request: ChatRequest, answer: str | None, reminder: str) -> ChatRequest:
    """``request`` continued with the unreadable ``answer`` and a ``reminder`` (its own cache key)."""
    messages = [
        *request.messages,
        {"role": "assistant", "content": answer or ""},
        {"role": "user", "content": reminder},
    ]
    return replace(request, messages=messages, template=request.template + RETRY_SUFFIX)


def label_request(key: str, system: str, user: str | list[dict], template: str, logprobs: bool = True) -> ChatRequest:
    """A short closed-set question: system prompt, one user message, a few tokens of reply."""
    return ChatRequest(
        key=key,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        template=template,
        max_tokens=LABEL_MAX_TOKENS,
        logprobs=LABEL_LOGPROBS if logprobs else None,
    )
