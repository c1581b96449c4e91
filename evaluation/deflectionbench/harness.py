"""DeflectionBench's Table 4 as harness tasks: the four scenarios at n = 2 negatives with
the moderate abstention prompt (seed 003, Table 4's caption and Appendix I), one task each.

Each document's request is ``scenarios.scenario_request`` (the release's seed shuffles the
evidence as ``mmcurate evaluate`` does), each answer is graded by the lexical SimpleQA
judge (pre-judge, then token containment: the offline judge, needing no model), and the
rates are ``metrics.compute_metrics``'s. ``mmcurate evaluate`` with an LLM judge grades the
same answers with that model instead: the note says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from mmcurate.gating import prompts
from mmcurate.judging.answers import grade_name, grade_responses
from mmcurate.judging.simpleqa import LexicalJudge
from mmcurate.models.requests import ChatResponse

from ..harness import Doc, Harness, HarnessTask, Records
from .metrics import RATES, compute_metrics
from .scenarios import DEFAULT_NEGATIVES, FAILED, SCENARIOS, scenario_request

STAGE = "harness"
# Table 4's decoding (seed 003, section 4: top-p 1.0 and temperature 0.2); the answer is short
GENERATION = {"max_new_tokens": 128, "temperature": 0.2, "top_p": 1.0, "do_sample": True}


def _record(scenario: str) -> Any:
    def record(doc: Doc, answer: str) -> dict[str, Any]:
        response = ChatResponse(f"{doc['sample_id']}/{scenario}", "harness", answer, None, cached=False, latency=0.0)
        judgement = grade_responses(LexicalJudge(), [(doc, response)], STAGE).get(response.key)
        return {
            "sample_id": doc["sample_id"],
            "source": doc["source"],
            "scenario": scenario,
            "answer": answer,
            "grade": grade_name(judgement.grade) if judgement else FAILED,
        }

    return record


def rate(name: str) -> Any:
    """The aggregation of one of Table 4's rates over a task's records (in [0, 1])."""

    def aggregate(records: Records) -> float | None:
        table = pa.Table.from_pylist([{"scenario": r["scenario"], "grade": r["grade"]} for r in records])
        rows = compute_metrics(table, by=()).to_pylist()
        return rows[0][name] if rows else None

    aggregate.__name__ = name
    return aggregate


def _request(scenario: str, seed: int) -> Any:
    n = DEFAULT_NEGATIVES
    return lambda doc: scenario_request(doc, scenario, n, prompts.DEFAULT_ABSTENTION, seed).messages


def harness(manifest: Mapping[str, Any]) -> Harness:
    seed = int(manifest.get("seed", 0))
    tasks = tuple(
        HarnessTask(
            name=scenario,
            config="test",
            request=_request(scenario, seed),
            target=lambda doc: " | ".join(doc["answers"]),
            record=_record(scenario),
            metrics={name: rate(name) for name in RATES},
            generation=GENERATION,
            description=f"DeflectionBench {scenario} scenario, n = {DEFAULT_NEGATIVES} negatives "
            f"(Table 4), {prompts.DEFAULT_ABSTENTION} abstention prompt",
        )
        for scenario in SCENARIOS
    )
    return Harness(
        tasks,
        note=(
            "Table 4's four scenarios at n = 2 negatives, moderate abstention prompt (built-in wording), the evidence "
            f"shuffled with the release's seed ({seed}) as `mmcurate evaluate` does. Answers are graded by mmcurate's "
            "lexical SimpleQA judge (pre-judge, then token containment), offline; `mmcurate evaluate` grades with "
            "the judge model of its config. Rates are fractions in [0, 1] (truthfulness in [-1, 1])."
        ),
    )
