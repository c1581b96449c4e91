"""Typed claims from a statement (Kestrel's initialisation step, seed 000 3.1), for
``judging.claims``.

Two extractors (``core.specs.ClaimExtractorSpec``):

- a model of the config, asked for JSON ``{"claims": [{"id", "type", "text", "targets"}]}``:
  one to ``MAX_CLAIMS`` claims, unique ids, a type among existence / colour / count /
  position, a non-empty text and a list of target phrases; validated strictly
  (``models.json_replies``: one retry, then an error, never a guessed claim);
- ``heuristic``, the offline stand-in (``HEURISTIC_NAME`` in manifests): the statement itself
  as one claim ``c1``, typed by the first rule that matches: ``count`` (a number followed by
  a plural noun: "three legs", "12 floors"; a bare year or a measure such as "330 metres"
  is not a count), ``colour`` (a colour
  word), ``position`` (a spatial phrase: left of, above, behind, next to, ...), else
  ``existence``, the catch-all for "what the statement says is so". It cannot split a
  statement into several claims and finds no targets.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mmcurate.benchmarks.shared import ClaimType
from mmcurate.core.specs import ClaimExtractorSpec, Heuristic, coerce
from mmcurate.judging.claims import CLAIM_TYPES, Claim
from mmcurate.models.json_replies import json_object
from mmcurate.models.labels import Label, RecordError, ask_parsed
from mmcurate.models.requests import ChatRequest

HEURISTIC_NAME = "heuristic-claims-v1"
MAX_CLAIMS = 4
CLAIM_KEYS = {"id", "type", "text", "targets"}
TEMPLATE = "claims.extract.v1"
SYSTEM = (
    "You split a statement into the few claims a checker would verify, each a short, concrete "
    f"sentence of its own. Give each claim an id (c1, c2, ...), a type ({', '.join(CLAIM_TYPES)}: "
    "use count for numbers of things, colour for colours, position for where things are, and "
    "existence for any other fact the statement asserts) and its targets: the one or two "
    f"things the claim is about, as short noun phrases. At most {MAX_CLAIMS} claims. Reply with "
    'JSON only: {"claims": [{"id": "c1", "type": "existence", "text": "...", "targets": ["..."]}]}'
)
REMINDER = "Your reply could not be used. Reply with the JSON object only, in exactly the format asked for"
MAX_TOKENS = 256

_NUMBER = r"(?:\d[\d,.]*|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|dozens?|hundreds?|thousands?)"
_UNITS = (
    r"(?:metres|meters|feet|inches|miles|kilometres|kilometers|centimetres|centimeters|years|months|days|"
    r"hours|minutes|seconds|tons|tonnes|kilograms|grams|pounds|degrees|percent|dollars|euros)"
)
_COUNT = re.compile(rf"\b{_NUMBER}\s+(?!{_UNITS}\b)(?:[a-z]+\s+)?(?!{_UNITS}\b)[a-z]+s\b", re.IGNORECASE)
_COLOUR = re.compile(
    r"\b(?:red|orange|yellow|green|blue|purple|violet|pink|brown|black|white|gr[ae]y|silver|golden|beige|"
    r"teal|cyan|magenta|maroon|navy|turquoise|colou?red)\b",
    re.IGNORECASE,
)
_POSITION = re.compile(
    r"\b(?:left of|right of|above|below|beneath|underneath|under|behind|in front of|next to|beside|"
    r"on top of|between|inside|outside|north of|south of|east of|west of|near)\b",
    re.IGNORECASE,
)


def heuristic_type(statement: str) -> ClaimType:
    kind: ClaimType
    for kind, pattern in (("count", _COUNT), ("colour", _COLOUR), ("position", _POSITION)):
        if pattern.search(statement):
            return kind
    return "existence"


def heuristic_claims(statement: str) -> list[Claim]:
    """The offline stand-in: the statement as one typed claim (see the module docstring)."""
    text = statement.strip()
    return [Claim("c1", heuristic_type(text), text)] if text else []


def claim_of(raw: Any, optional: frozenset[str] = frozenset()) -> Claim:
    """One claim record ``{"id", "type", "text", "targets"}`` (plus any ``optional`` keys,
    which are read past), validated; RecordError says what is wrong."""
    if not isinstance(raw, dict) or not CLAIM_KEYS <= set(raw) <= CLAIM_KEYS | optional:
        raise RecordError(
            f"each claim needs exactly the keys {sorted(CLAIM_KEYS)}"
            + (f" (and may have {sorted(optional)})" if optional else "")
        )
    if not isinstance(raw["id"], str) or not raw["id"].strip():
        raise RecordError("a claim id is not a non-empty string")
    if raw["type"] not in CLAIM_TYPES:
        raise RecordError(f"claim {raw['id']}: type {raw['type']!r} is not one of {', '.join(CLAIM_TYPES)}")
    if not isinstance(raw["text"], str) or not raw["text"].strip():
        raise RecordError(f"claim {raw['id']}: text is empty")
    targets = raw["targets"]
    if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
        raise RecordError(f"claim {raw['id']}: targets are not a list of phrases")
    return Claim(raw["id"].strip(), raw["type"], raw["text"].strip(), tuple(targets))


def parse_claims(text: str) -> list[Claim]:
    """The claims a model's reply lists, validated (see the module docstring)."""
    raw = json_object(text)
    if set(raw) != {"claims"} or not isinstance(raw["claims"], list):
        raise RecordError('a reply has exactly one key, "claims", holding a list')
    claims = [claim_of(item) for item in raw["claims"]]
    if not 1 <= len(claims) <= MAX_CLAIMS:
        raise RecordError(f"{len(claims)} claims; give 1 to {MAX_CLAIMS}")
    if len({c.id for c in claims}) != len(claims):
        raise RecordError("two claims share an id")
    return claims


def extract_request(key: str, statement: str, context: str | None = None) -> ChatRequest:
    about = f"The statement comes from an answer to this question: {context}\n" if context else ""
    return ChatRequest(
        key=key,
        messages=[
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"{about}Statement: {statement}\nReply with the JSON object only."},
        ],
        template=TEMPLATE,
        max_tokens=MAX_TOKENS,
    )


def extractor_name(spec: ClaimExtractorSpec | str) -> str:
    extractor: ClaimExtractorSpec = coerce(ClaimExtractorSpec, spec)
    return HEURISTIC_NAME if isinstance(extractor, Heuristic) else f"llm:{extractor.name}"


def extract_claims(
    spec: ClaimExtractorSpec | str,
    statements: list[tuple[str, str, str | None]],
    pool: Any = None,
    stage: str = "claims",
) -> list[Label]:
    """Claims of each ``(key, statement, context)``: a ``Label`` whose value is the claim list,
    or an error. ``pool`` (a ``models.client.ModelPool``) is needed for a model extractor."""
    extractor: ClaimExtractorSpec = coerce(ClaimExtractorSpec, spec)
    if isinstance(extractor, Heuristic):
        return [Label(heuristic_claims(statement), [None], None) for _, statement, _ in statements]
    requests = [extract_request(key, statement, context) for key, statement, context in statements]
    try:
        return ask_parsed(pool.client(extractor.name), requests, parse_claims, REMINDER, stage, "a claims record")
    finally:
        pool.release(extractor.name)


def claims_json(claims: list[Claim]) -> str:
    return json.dumps([c.as_json() for c in claims], ensure_ascii=False)
