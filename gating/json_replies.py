"""Asking for structured (JSON) replies, each validated against its own request.

``ask_parsed`` (``gating.labels``) reads every reply of a batch with one parser. A verifier
record must be checked against the claims and evidence of *its* request (a citation to an
evidence id that request did not show is invalid), so ``ask_validated`` takes one validator
per request. The rule is the same: a validator returns the value or raises ``RecordError``
with the reason; an invalid first reply gets one retry with a reminder that names the
reason; a second invalid reply, or a failed call, is an error (``Label.error``), counted by
the caller and never repaired into a value.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from mmcurate.core.errors import MmcurateError

from .labels import Label, _retry_request
from .requests import ChatRequest

Validator = Callable[[str], Any]  # reply text -> value, or RecordError
_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.DOTALL)


class RecordError(MmcurateError):
    """A reply that is not the valid record asked for; says why."""


def json_object(text: str) -> dict[str, Any]:
    """The one JSON object a reply consists of (a single surrounding ```json fence is
    tolerated, nothing else), or RecordError."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        value = json.loads(body)
    except ValueError:
        raise RecordError("reply is not one JSON object") from None
    if not isinstance(value, dict):
        raise RecordError("reply is not one JSON object")
    return value


def _read(validate: Validator, text: str) -> tuple[Any, str | None]:
    try:
        return validate(text), None
    except RecordError as exc:
        return None, str(exc)


def ask_validated(
    client: Any,  # gating.client.ModelClient
    requests: list[ChatRequest],
    validators: Sequence[Validator],
    reminder: str,
    stage: str,
) -> list[Label]:
    """One ``Label`` per request: the validated value, or an error with the reason."""
    if len(validators) != len(requests):
        raise ValueError("ask_validated needs one validator per request")
    if not requests:
        return []
    first = client.chat(requests, stage)
    out: list[Label | None] = [None] * len(requests)
    retry: list[tuple[int, str]] = []
    for i, response in enumerate(first):
        if response.text is None:
            out[i] = Label(None, [None], f"model call failed: {response.error}")
            continue
        value, problem = _read(validators[i], response.text)
        if problem is None:
            out[i] = Label(value, [response.text], None, response.cached)
        else:
            retry.append((i, problem))
    if retry:
        second = client.chat([_retry_request(requests[i], first[i].text, f"{reminder} (Problem: {problem}.)")
                              for i, problem in retry], stage)
        for (i, _), response in zip(retry, second):
            raw = [first[i].text, response.text]
            if response.text is None:
                out[i] = Label(None, raw, f"retry failed: {response.error}")
                continue
            value, problem = _read(validators[i], response.text)
            out[i] = Label(value, raw, None) if problem is None else Label(None, raw, f"invalid reply: {problem}")
    return out  # type: ignore[return-value]
