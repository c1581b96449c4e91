"""JSON replies: the one object a reply must consist of.

Records are read by ``models.labels.ask_parsed`` with one validator per request (a verifier
record is checked against the claims and evidence of *its* request): a validator returns the
value or raises ``RecordError`` with the reason; an invalid first reply gets one retry with a
reminder that names the reason; a second invalid reply, or a failed call, is an error
(``Label.error``), counted by the caller and never repaired into a value.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mmcurate.models.labels import RecordError

_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.DOTALL)


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
