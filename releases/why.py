"""The decision trace of one sample, read from a release's ledger, and its rendering.

``format_decision`` renders one ledger row as the ``why`` command prints it: the row's
header, then its detail. Claim-level verification rows (``verify.claim``,
``verify.sentence``) and cutoff rows (``citation.cutoff``) get a readable line of their own
(claim, round, confidence against its threshold, cited evidence and documents; how the
rounds ended and what changed; what the cutoff kept); every other row shows its detail JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow.compute as pc

from mmcurate.core.plural import counted

from .errors import ReleaseError
from .reader import Release

TRACE_COLUMNS = ("stage", "check", "model", "context_id", "verdict", "detail", "run_id")


@dataclass
class Trace:
    sample_id: str
    in_release: bool
    decisions: list[dict]  # ledger rows in the order they were recorded


def trace_sample(release: Release, sample_id: str) -> Trace:
    ledger = release.ledger
    rows = ledger.filter(pc.equal(ledger.column("sample_id"), sample_id)).select(list(TRACE_COLUMNS)).to_pylist()
    in_release = sample_id in set(release.sample_ids)
    if not rows and not in_release:
        raise ReleaseError(
            f"unknown sample id {sample_id!r}: not in {release.benchmark} {release.version} or its ledger"
        )
    return Trace(sample_id=sample_id, in_release=in_release, decisions=rows)


def _cited(ids: list[str], documents: list[str]) -> str:
    return ", ".join(f"{e} ({doc})" for e, doc in zip(ids, documents)) or "nothing"


def _claim(d: dict[str, Any]) -> str:
    passes = ">=" if d["confident"] else "<"
    state = "confident" if d["confident"] else "not confident"
    return (
        f'round {d["round"]}, {d["type"]} claim {d["claim"]} "{d["text"]}": confidence {d["confidence"]:.2f} '
        f"{passes} {d['threshold']:.2f} ({state}); cites {_cited(d['citations'], d['documents'])}; why: {d['why']}"
    )


def _sentence(d: dict[str, Any]) -> str:
    before, after = d["before"], d["after"]
    change = (
        f"citations {before['text_citations']} -> {after['text_citations']}, "
        f"flagged {before['flagged']} -> {after['flagged']}"
    )
    if "rounds" not in d:
        return f'sentence {d["sentence"]} "{d["text"]}": {d.get("reason") or d.get("error")}; {change}'
    ended = f"{counted(d['rounds'], 'round')} {'/'.join(d['round_verdicts'])}, stopped: {d['stopped']}"
    gate = "gate open" if d["gated"] else "gate closed"
    error = f"; error: {d['error']}" if d.get("error") else ""
    return f'sentence {d["sentence"]} "{d["text"]}" ({d["claims_by"]}): {ended}; {gate}: {change}{error}'


def _cutoff(d: dict[str, Any]) -> str:
    theta = "" if d.get("theta") is None else f" (theta {d['theta']:.3f})"
    return (
        f"sentence {d['sentence']}: {d['cutoff']} kept {d['kept']} of {d['retrieved']}{theta}: "
        f"{', '.join(d['kept_ids']) or 'none'}; cut: {', '.join(d['cut_ids']) or 'none'}"
    )


READABLE: dict[str, Callable[[dict[str, Any]], str]] = {
    "verify.claim": _claim,
    "verify.sentence": _sentence,
    "citation.cutoff": _cutoff,
}


def format_decision(row: dict[str, Any]) -> str:
    """One ledger row as ``why`` prints it (see the module docstring)."""
    model = f" model={row['model']}" if row["model"] else ""
    context = f" context={row['context_id']}" if row["context_id"] else ""
    head = f"[{row['run_id']}] {row['stage']}/{row['check']}{model}{context}: {row['verdict']}"
    render = READABLE.get(row["check"])
    if render is None:
        return f"{head} {row['detail'] or ''}"
    return f"{head}\n      {render(json.loads(row['detail']))}"
