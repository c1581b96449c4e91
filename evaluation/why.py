"""One item of an evaluation run, as ``mmcurate why RUN SAMPLE`` prints it: its answer rows
(every condition it was asked under); for a verify-first or CRUISE run the gate's trace (checks,
answers, confidence, decision and reason); for a Kestrel run the trace of every round: the
initial answer and claim, what the grounder found, the evidence by id, the verifier's record
against the thresholds, the verdict, the gate and the update (``evaluation.kestrel``)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from mmcurate.core.errors import MmcurateError

ANSWERS = "answers.parquet"
SHOWN = ("variant", "split", "scenario", "n_negatives", "label", "answer", "grade", "crag_grade", "system", "stopped",
         "error")


def is_run(folder: Path | str) -> bool:
    return (Path(folder) / ANSWERS).is_file()


def _claim(c: dict[str, Any]) -> str:
    return f"claim {c['id']} ({c['type']}) \"{c['text']}\" targets {', '.join(c['targets']) or '-'}"


def kestrel_lines(trace: dict[str, Any]) -> list[str]:
    initial = trace.get("initial") or {}
    if "answer" not in initial:
        return [f"initialization failed: {initial.get('raw')}"]
    lines = [f"initial: {initial['answer']}; " + "; ".join(_claim(c) for c in initial["claims"])]
    guard = trace.get("yes_guard")
    if guard:
        lines.append(f"yes-guard: {guard.get('answer')} ({guard.get('confidence')}): {guard.get('reason')}"
                     + (" -> answer No" if guard.get("changed") else "") + (f"; error: {guard['error']}" if guard.get("error") else ""))
    thresholds = trace.get("thresholds") or {}
    for r in trace.get("rounds", []):
        lines.append(f"round {r['round']}: " + "; ".join(_claim(c) for c in r["claims"]))
        lines += [f"  {e['id']}{' [image ' + e['image'][:12] + ']' if e.get('image') else ''}: {e['text']}"
                  for e in r["evidence"]]
        types = {c["id"]: c["type"] for c in r["claims"]}
        for check in (r["record"] or {}).get("checked", []):
            kind = types.get(check["claim_id"], "")
            lines.append(f"  verifier: {check['claim_id']} {check['status']}, confidence {check['confidence']:.2f} "
                         f"({kind} threshold {thresholds.get(kind, float('nan')):.2f}); cites "
                         f"{', '.join(check['citations']) or 'nothing'}; why: {check['why']}")
        if r.get("error"):
            lines.append(f"  verifier error: {r['error']}")
        update = (f"proposed {r['proposed']}: {r['answer_before']} -> {r['answer_after']}" if "proposed" in r
                  else f"no update ({r.get('refine_error') or 'the round had no record'})")
        lines.append(f"  verdict {r['verdict']}, gate {'open' if r['gated'] else 'closed'}; {update}")
    lines.append(f"stopped: {trace.get('stopped')}; final: {trace.get('final')}")
    return lines


def gate_lines(trace: dict[str, Any]) -> list[str]:
    """A verify-first / CRUISE gate trace (``evaluation.verify_first``): the checks that ran,
    what each said, and the decision with its reason."""
    lines = [f"checks: {', '.join(trace.get('checks') or []) or 'none'}"]
    router = trace.get("router") or {}
    if router:
        lines.append("router: " + ", ".join(f"{flag.replace('_', ' ')} {(router.get(flag) or {}).get('label')}"
                                            for flag in ("needs_outside_knowledge", "time_sensitive")))
    context = trace.get("context") or {}
    if context:
        lines.append(f"context: retrieval {context.get('retrieval')}, {context.get('used')} used"
                     + (f", S_ret {context['score']:g}" if isinstance(context.get("score"), (int, float)) else ""))
    for name, text in (trace.get("answers") or {}).items():
        lines.append(f"answer {name.replace('_', ' ')}: {text}")
    if "consistency" in trace:
        lines.append(f"consistency judge: {trace['consistency'].get('label')}")
    if "confidence" in trace:
        lines.append(f"chain-of-verification confidence: {trace['confidence'].get('label')}"
                     + (f" (threshold {trace['confidence']['threshold']:g})" if "threshold" in trace["confidence"] else ""))
    if trace.get("timed_out"):
        lines.append(f"timed out after {trace['timed_out'].get('after')} ({trace['timed_out'].get('seconds')} s)")
    lines.append(f"decision: {trace.get('decision')}: {trace.get('reason')}")
    return lines


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
            trace = json.loads(row["trace"])
            lines += [f"  {line}" for line in (gate_lines(trace) if "decision" in trace else kestrel_lines(trace))]
    return lines
