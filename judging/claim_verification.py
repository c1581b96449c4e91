"""Kestrel's verification rounds with a model: claims and evidence in, ``Outcome`` out.

Each round asks the verifier for one JSON record per statement still open (one batch per
round, across statements), validated against that statement's claims and evidence
(``judging.claims.parse_record``, through ``models.labels.ask_parsed``). From the
second round on, the request also shows the previous round's record, so the verifier can
reconsider it (Kestrel's stateful rounds; with a deterministic model and the response cache,
a repeated identical request could only repeat its answer). Rounds stop as
``judging.claims.stop_reason`` says.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from typing import Any

from mmcurate.benchmarks.shared import ClaimGate
from mmcurate.judging.claim_extraction import claims_json
from mmcurate.judging.claims import Claim, Evidence, Outcome, Round, judge_round, parse_record, stop_reason
from mmcurate.models.labels import ask_parsed
from mmcurate.models.requests import ChatRequest

TEMPLATE = "claims.verify.v1"
SYSTEM = (
    "You are a strict verifier. Judge each claim using ONLY the evidence items given; do not "
    "use common sense or what you know. For each claim choose exactly one status: supported "
    "(the evidence clearly confirms the claim), contradicted (the evidence clearly refutes it) "
    "or insufficient (the evidence is missing or ambiguous). Give your confidence in that "
    "status as a number from 0 to 1, a short reason, and the ids of the evidence items the "
    "reason rests on, using only ids that appear in the evidence. Overall verdict: "
    "contradicted if at least one claim is strongly contradicted, supported if all claims are "
    "strongly supported, otherwise insufficient. Reply with JSON only: "
    '{"verdict": "supported|contradicted|insufficient", "checked": [{"claim_id": "c1", '
    '"status": "supported|contradicted|insufficient", "confidence": 0.0, "why": "...", '
    '"citations": ["e1"]}]}'
)
REMINDER = "Your reply could not be used. Reply with the JSON record only, in exactly the format asked for"
MAX_TOKENS = 384
EVIDENCE_CHARS = 1500  # an evidence item longer than this is cut in the prompt


@dataclass(frozen=True)
class ClaimTask:
    """One statement to verify: its claims and the evidence it may be checked against."""

    key: str
    statement: str
    claims: list[Claim]
    evidence: list[Evidence]


def verify_request(task: ClaimTask, previous: Round | None = None) -> ChatRequest:
    lines = [f"Statement: {task.statement}", f"Claims: {claims_json(task.claims)}", "Evidence:"]
    lines += [f"[{e.id}] {e.text[:EVIDENCE_CHARS]}" for e in task.evidence]
    if previous is not None and previous.record is not None:
        lines.append(
            f"Previous verdict (round {previous.number}): {json.dumps(previous.record.as_json(), ensure_ascii=False)}"
        )
    lines.append("Reply with the JSON record only.")
    return ChatRequest(
        key=task.key,
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(lines)}],
        template=TEMPLATE,
        max_tokens=MAX_TOKENS,
    )


def verify_claims(client: Any, tasks: list[ClaimTask], gate: ClaimGate, stage: str) -> list[Outcome]:
    """Rounds of verification for every task (each needs claims and evidence)."""
    rounds: list[list[Round]] = [[] for _ in tasks]
    open_ = [i for i, task in enumerate(tasks) if task.claims and task.evidence]
    if len(open_) != len(tasks):
        raise ValueError("every claim task needs claims and evidence")
    while open_:
        requests = [verify_request(tasks[i], rounds[i][-1] if rounds[i] else None) for i in open_]
        validators = [partial(parse_record, claims=tasks[i].claims, evidence=tasks[i].evidence) for i in open_]
        labels = ask_parsed(client, requests, validators, REMINDER, stage, "a verifier record")
        still: list[int] = []
        for i, label in zip(open_, labels):
            rounds[i].append(
                judge_round(len(rounds[i]) + 1, label.label, tasks[i].claims, gate, label.raw, label.error)
            )
            if stop_reason(rounds[i], gate) is None:
                still.append(i)
        open_ = still
    return [Outcome.of(r, stop_reason(r, gate)) for r in rounds]  # type: ignore[arg-type]
