"""One item of an evaluation run, as ``mmcurate why RUN SAMPLE`` prints it: its answer rows
(every condition it was asked under) and its trace. For a Kestrel run, every round: the
initial answer and claim, what the grounder found, the evidence by id, the verifier's record
against the thresholds, the verdict, the gate and the update (``evaluation.pope.kestrel``). For a
verify-first or CRUISE run, every check that ran in its order (router flags, image summary,
context, retrieval gate, the two answers, consistency, confidence, the time budget) and the
decision with its reason (``evaluation.verify_first``, ``evaluation.cragmm.cruise``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from mmcurate.core.errors import MmcurateError

ANSWERS = "answers.parquet"
# the columns of an answer row printed, those saying which condition (and, with CRUISE's ablations, which
# variant) first: an item answered under several shows one block per row, each named
SHOWN = (
    "task",
    "variant",
    "split",
    "scenario",
    "n_negatives",
    "label",
    "answer",
    "grade",
    "crag_grade",
    "system",
    "stopped",
    "error",
)


def is_run(folder: Path | str) -> bool:
    return (Path(folder) / ANSWERS).is_file()


def _claim(c: dict[str, Any]) -> str:
    return f'claim {c["id"]} ({c["type"]}) "{c["text"]}" targets {", ".join(c["targets"]) or "-"}'


def kestrel_lines(trace: dict[str, Any]) -> list[str]:
    initial = trace.get("initial") or {}
    if "answer" not in initial:
        return [f"initialization failed: {initial.get('raw')}"]
    lines = [f"initial: {initial['answer']}; " + "; ".join(_claim(c) for c in initial["claims"])]
    guard = trace.get("yes_guard")
    if guard:
        lines.append(
            f"yes-guard: {guard.get('answer')} ({guard.get('confidence')}): {guard.get('reason')}"
            + (" -> answer No" if guard.get("changed") else "")
            + (f"; error: {guard['error']}" if guard.get("error") else "")
        )
    thresholds = trace.get("thresholds") or {}
    for r in trace.get("rounds", []):
        lines.append(f"round {r['round']}: " + "; ".join(_claim(c) for c in r["claims"]))
        lines += [
            f"  {e['id']}{' [image ' + e['image'][:12] + ']' if e.get('image') else ''}: {e['text']}"
            for e in r["evidence"]
        ]
        types = {c["id"]: c["type"] for c in r["claims"]}
        for check in (r["record"] or {}).get("checked", []):
            kind = types.get(check["claim_id"], "")
            lines.append(
                f"  verifier: {check['claim_id']} {check['status']}, confidence {check['confidence']:.2f} "
                f"({kind} threshold {thresholds.get(kind, float('nan')):.2f}); cites "
                f"{', '.join(check['citations']) or 'nothing'}; why: {check['why']}"
            )
        if r.get("error"):
            lines.append(f"  verifier error: {r['error']}")
        update = (
            f"proposed {r['proposed']}: {r['answer_before']} -> {r['answer_after']}"
            if "proposed" in r
            else f"no update ({r.get('refine_error') or 'the round had no record'})"
        )
        lines.append(f"  verdict {r['verdict']}, gate {'open' if r['gated'] else 'closed'}; {update}")
    lines.append(f"stopped: {trace.get('stopped')}; final: {trace.get('final')}")
    return lines


def _label(check: dict[str, Any]) -> str:
    """A check's label as the trace holds it (``verify_first._label_trace``): the label, else why not."""
    if check.get("error"):
        return f"unreadable ({check['error']}; replies {check.get('raw')})"
    return str(check.get("label"))


def gate_lines(trace: dict[str, Any]) -> list[str]:
    """A verify-first or CRUISE trace: each check that ran, then the decision and its reason."""
    lines = []
    router = trace.get("router")
    if router:
        lines.append(
            f"router ({router.get('model')}): needs outside knowledge "
            f"{_label(router.get('needs_outside_knowledge') or {})}, time-sensitive "
            f"{_label(router.get('time_sensitive') or {})}"
        )
    summary = trace.get("summary")
    if summary:
        lines.append(
            f"image summary ({summary.get('model')}): "
            + (summary["text"] if summary.get("text") is not None else f"failed ({summary.get('error')})")
        )
    context = trace.get("context")
    if context:
        lines.append("context: " + ", ".join(f"{k} {v}" for k, v in context.items()))
    retrieval = trace.get("retrieval_gate")
    if retrieval:
        score = retrieval.get("score")
        lines.append(
            f"retrieval gate ({retrieval.get('reading')} reading): score "
            f"{'none (evidence given)' if score is None else f'{score:g}'}, tau_ret {retrieval.get('tau_ret')}"
        )
    answers = trace.get("answers")
    if answers:
        lines.append(f"answer with context: {answers.get('with_context')}")
        lines.append(f"answer without context: {answers.get('without_context')}")
    if trace.get("consistency"):
        lines.append(f"consistent: {_label(trace['consistency'])}")
    confidence = trace.get("confidence")
    if confidence:
        lines.append(
            f"confidence: {_label(confidence)}"
            + (f" (threshold {confidence['threshold']:g})" if "threshold" in confidence else "")
        )
    timed = trace.get("timed_out")
    if timed:
        lines.append(
            f"time budget: over after {timed.get('after')} ({timed.get('seconds')} s of {timed.get('limit')} s)"
        )
    lines.append(
        f"decision: {trace.get('decision', 'none recorded')}" + (f": {trace['reason']}" if trace.get("reason") else "")
    )
    return lines


def trace_lines(trace: dict[str, Any]) -> list[str]:
    """A trace of either kind: Kestrel's rounds, or the verify-first / CRUISE checks."""
    return kestrel_lines(trace) if "initial" in trace or "rounds" in trace else gate_lines(trace)


def item_lines(folder: Path | str, sample_id: str) -> list[str]:
    """The item's rows in the run at ``folder`` and their traces; MmcurateError when it has none."""
    answers = pq.read_table(Path(folder) / ANSWERS)
    rows = answers.filter(pc.equal(answers.column("sample_id"), sample_id)).to_pylist()
    if not rows:
        raise MmcurateError(f"unknown item {sample_id!r}: not in the evaluation run {folder}")
    lines = []
    for row in rows:
        lines.append(", ".join(f"{k} {row[k]}" for k in SHOWN if row.get(k) is not None))
        if row.get("trace"):
            lines += [f"  {line}" for line in trace_lines(json.loads(row["trace"]))]
    return lines
