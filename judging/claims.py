"""Kestrel's claim-level verification records, verdict rule and change gate (seed 000, 3.3-3.4).

A statement is checked as a few typed claims (``existence``, ``colour``, ``count``,
``position``) against evidence items with stable ids (the same id in every round). A
verifier replies with one JSON record::

    {"verdict": "supported|contradicted|insufficient",
     "checked": [{"claim_id": "c1", "status": "supported|contradicted|insufficient",
                  "confidence": 0.0-1.0, "why": "...", "citations": ["e1", ...]}]}

``parse_record`` accepts a reply only when it is exactly that: one JSON object (a single
surrounding ```json fence is tolerated, nothing else), every claim checked exactly once, no
unknown claim id, a known status, a confidence in [0, 1] (a number, not a string or a
boolean), a ``why`` string and citations that name evidence items that exist. Anything else
raises ``RecordError`` with the reason; the caller retries once, then counts an error.
Nothing is repaired or guessed.

Verdict rule (computed here; the verifier's own ``verdict`` is kept for the trace only): a
claim is *confident* when its confidence reaches its type's threshold (``ClaimGate``).

- ``contradicted``: some claim is confidently contradicted and cites evidence;
- ``supported``: every claim is confidently supported;
- ``insufficient``: otherwise.

Change gate: a verdict may change what the caller holds (an answer, a sentence's citations)
only when it is decisive and backed by cited evidence: a contradicted verdict (cited by
construction), or a supported verdict whose every claim cites evidence.

Rounds (``stop_reason``): a gated contradiction does not end them. The caller revises what
it holds through the gate and verifies again (Kestrel's stateful self-refinement, 3.4: the
answer may be revised in any round). Rounds stop after ``stable_rounds`` supported rounds in
a row (with what the caller holds unchanged over them, when the caller tracks it: "the
answer is stable with two consecutive supported verdicts", 4.1), on an error, or after
``max_rounds``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from mmcurate.benchmarks.shared import ClaimGate, ClaimType
from mmcurate.models.json_replies import json_object
from mmcurate.models.labels import RecordError

CLAIM_TYPES: tuple[ClaimType, ...] = ("existence", "colour", "count", "position")
STATUSES = ("supported", "contradicted", "insufficient")
ERROR = "error"  # a round without a valid record: never a verdict
RECORD_KEYS = {"verdict", "checked"}
CHECK_KEYS = {"claim_id", "status", "confidence", "why", "citations"}

Stop = Literal["stable", "max_rounds", "error", "no_stronger_evidence"]


@dataclass(frozen=True)
class Claim:
    id: str
    type: ClaimType
    text: str
    targets: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, "text": self.text, "targets": list(self.targets)}


@dataclass(frozen=True)
class Evidence:
    id: str  # stable across rounds: what citations name
    text: str
    source: str | None = None  # where it comes from, e.g. a document id


@dataclass(frozen=True)
class ClaimCheck:
    claim_id: str
    status: str
    confidence: float
    why: str
    citations: tuple[str, ...]


@dataclass(frozen=True)
class VerifierRecord:
    verdict: str  # as the verifier stated it (the rule's verdict is ``verdict()``)
    checked: tuple[ClaimCheck, ...]

    def of(self, claim_id: str) -> ClaimCheck:
        return next(c for c in self.checked if c.claim_id == claim_id)

    def as_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "checked": [
                {
                    "claim_id": c.claim_id,
                    "status": c.status,
                    "confidence": c.confidence,
                    "why": c.why,
                    "citations": list(c.citations),
                }
                for c in self.checked
            ],
        }


def _status(value: Any, where: str) -> str:
    if value not in STATUSES:
        raise RecordError(f"{where} {value!r} is not one of {', '.join(STATUSES)}")
    return value


def _check(raw: Any, claims: dict[str, Claim], evidence: set[str]) -> ClaimCheck:
    if not isinstance(raw, dict) or set(raw) != CHECK_KEYS:
        raise RecordError(f"each checked item needs exactly the keys {sorted(CHECK_KEYS)}")
    claim_id = raw["claim_id"]
    if not isinstance(claim_id, str) or claim_id not in claims:
        raise RecordError(f"unknown claim id {claim_id!r}")
    confidence = raw["confidence"]
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, (int, float))
        or not math.isfinite(confidence)
        or not 0.0 <= confidence <= 1.0
    ):
        raise RecordError(f"claim {claim_id}: confidence {confidence!r} is not a number in [0, 1]")
    if not isinstance(raw["why"], str):
        raise RecordError(f"claim {claim_id}: 'why' is not a string")
    citations = raw["citations"]
    if not isinstance(citations, list) or not all(isinstance(c, str) for c in citations):
        raise RecordError(f"claim {claim_id}: citations are not a list of evidence ids")
    unknown = [c for c in citations if c not in evidence]
    if unknown:
        raise RecordError(f"claim {claim_id} cites unknown evidence id {unknown[0]!r}")
    return ClaimCheck(
        claim_id,
        _status(raw["status"], f"claim {claim_id}: status"),
        float(confidence),
        raw["why"],
        tuple(dict.fromkeys(citations)),
    )


def parse_record(text: str, claims: list[Claim], evidence: list[Evidence]) -> VerifierRecord:
    """The verifier record ``text`` holds, validated against ``claims`` and ``evidence``."""
    raw = json_object(text)
    if set(raw) != RECORD_KEYS:
        raise RecordError(f"a record has exactly the keys {sorted(RECORD_KEYS)}, got {sorted(raw)}")
    verdict = _status(raw["verdict"], "verdict")
    if not isinstance(raw["checked"], list):
        raise RecordError("'checked' is not a list")
    by_id = {c.id: c for c in claims}
    checked = tuple(_check(item, by_id, {e.id for e in evidence}) for item in raw["checked"])
    ids = [c.claim_id for c in checked]
    if len(set(ids)) != len(ids):
        raise RecordError("a claim is checked twice")
    missing = [c.id for c in claims if c.id not in ids]
    if missing:
        raise RecordError(f"claim {missing[0]} is not checked")
    return VerifierRecord(verdict, checked)


def confident(check: ClaimCheck, claim: Claim, gate: ClaimGate) -> bool:
    return check.confidence >= gate.thresholds[claim.type]


def verdict(record: VerifierRecord, claims: list[Claim], gate: ClaimGate) -> str:
    """The verdict rule (see the module docstring)."""
    pairs = [(claim, record.of(claim.id)) for claim in claims]
    if any(c.status == "contradicted" and c.citations and confident(c, claim, gate) for claim, c in pairs):
        return "contradicted"
    if pairs and all(c.status == "supported" and confident(c, claim, gate) for claim, c in pairs):
        return "supported"
    return "insufficient"


def gated(record: VerifierRecord, claims: list[Claim], gate: ClaimGate) -> bool:
    """May this record change what the caller holds? (the change gate)"""
    rule = verdict(record, claims, gate)
    if rule == "contradicted":
        return True
    return rule == "supported" and all(record.of(claim.id).citations for claim in claims)


def refuting(record: VerifierRecord, claims: list[Claim], gate: ClaimGate) -> list[str]:
    """The evidence ids cited by the claims the record confidently contradicts, in order."""
    ids = [
        e
        for claim in claims
        for c in [record.of(claim.id)]
        if c.status == "contradicted" and confident(c, claim, gate)
        for e in c.citations
    ]
    return list(dict.fromkeys(ids))


@dataclass(frozen=True)
class Round:
    """One verification round: the record (None on error), its verdict and whether it is gated."""

    number: int
    record: VerifierRecord | None
    verdict: str  # a STATUSES value, or ERROR
    gated: bool
    raw: list[str | None] = field(default_factory=list)  # the reply of each attempt
    error: str | None = None


def judge_round(
    number: int,
    record: VerifierRecord | None,
    claims: list[Claim],
    gate: ClaimGate,
    raw: list[str | None],
    error: str | None = None,
) -> Round:
    if record is None:
        return Round(number, None, ERROR, False, raw, error)
    return Round(number, record, verdict(record, claims, gate), gated(record, claims, gate), raw)


def stop_reason(rounds: list[Round], gate: ClaimGate, held: list[Any] | None = None) -> Stop | None:
    """Why verification stops after ``rounds``, or None to ask for another round. A
    contradiction never stops it (the caller revises and goes on). ``held``: what the caller
    held before the first round and after each round (one more entry than ``rounds``); when
    given, "stable" also needs it unchanged over the supported rounds."""
    last = rounds[-1]
    if last.verdict == ERROR:
        return "error"
    n = gate.stable_rounds
    recent = rounds[-n:]
    unchanged = held is None or all(h == held[-1] for h in held[-n - 1 :])
    if len(recent) == n and all(r.verdict == "supported" for r in recent) and unchanged:
        return "stable"
    if len(rounds) >= gate.max_rounds:
        return "max_rounds"
    return None


def stronger_evidence(
    before: list[tuple[str, str]],
    now: list[tuple[str, str]],
    before_record: VerifierRecord | None,
    now_record: VerifierRecord | None,
) -> bool:
    """Whether a round yields stronger evidence than the round before (Kestrel 3.4: the loop stops
    early "when additional iterations no longer yield stronger evidence"). The paper does not say
    what makes evidence stronger; our reading: the round shows an evidence item (id and text) the
    round before did not, or the verifier is more confident about a claim than it was before."""
    if set(now) - set(before):
        return True
    if now_record is None:
        return False
    earlier = {c.claim_id: c.confidence for c in before_record.checked} if before_record else {}
    return any(c.confidence > earlier.get(c.claim_id, 0.0) for c in now_record.checked)


@dataclass(frozen=True)
class Outcome:
    """Where the rounds ended: the last round's verdict, and whether it may change anything."""

    verdict: str
    gated: bool  # the last round passed the change gate
    stopped: Stop
    rounds: list[Round]

    @classmethod
    def of(cls, rounds: list[Round], stopped: Stop) -> Outcome:
        last = rounds[-1]
        return cls(last.verdict, last.gated, stopped, rounds)
