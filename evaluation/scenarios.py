"""The four-scenario evaluation protocol of VLM-DeflectionBench.

For one sample and one model, the scenario decides which evidence comes with the question:

- ``parametric``: none (no evidence section at all);
- ``oracle``: the gold contexts only;
- ``realistic``: the gold contexts plus ``n`` negatives (default 2, 1..10);
- ``adversarial``: ``n`` negatives only, no gold.

Negatives are taken from the top of the sample's ``negative_contexts`` (the pairing
order: source order, or the miner's ranking), so the sets for growing ``n`` are nested and
a sweep over ``n`` changes one thing at a time. The contexts shown are then shuffled with
``random.Random(f"{seed}:{sample_id}:{scenario}")``: the same seed gives the same order in
every run, on every machine. A sample with fewer negatives than asked shows what it has;
``n_contexts`` in the results records how many contexts were really shown.

The system prompt carries an abstention instruction (``prompts.ABSTENTION``: soft,
moderate (default), severe): the model should say "I don't know" when the evidence does not
support an answer. Results keep failed calls (grade ``FAILED``, with the error) and
ungradable answers (``JUDGE_ERROR``) as rows: ``metrics`` counts them apart.
"""
from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from mmcurate.gating import prompts
from mmcurate.gating.answers import grade_name, grade_responses
from mmcurate.gating.judge import Judge
from mmcurate.gating.requests import ChatRequest

SCENARIOS = ("parametric", "oracle", "realistic", "adversarial")
DEFAULT_NEGATIVES = 2
MAX_NEGATIVES = 10
FAILED = "FAILED"  # grade column of a call that failed for good (never a judge grade)
STAGE = "evaluate"

RESULTS = pa.schema(
    [
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("scenario", pa.string(), nullable=False),
        pa.field("n_negatives", pa.int32(), nullable=False),  # asked for (0: parametric/oracle)
        pa.field("n_contexts", pa.int32(), nullable=False),  # contexts actually shown
        pa.field("model", pa.string(), nullable=False),
        pa.field("abstention", pa.string(), nullable=False),
        pa.field("answer", pa.string()),
        pa.field("grade", pa.string(), nullable=False),  # a judge grade, or FAILED
        pa.field("judged_by", pa.string()),
        pa.field("error", pa.string()),
        pa.field("run_id", pa.string(), nullable=False),
    ]
)


def check_scenario(scenario: str) -> None:
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")


def check_negatives(n: int) -> None:
    if not 1 <= n <= MAX_NEGATIVES:
        raise ValueError(f"number of negatives must be in 1..{MAX_NEGATIVES}, got {n}")


def scenario_contexts(
    row: Mapping[str, Any], scenario: str, n_negatives: int = DEFAULT_NEGATIVES, seed: int = 0
) -> list[dict[str, Any]] | None:
    """The evidence shown in ``scenario`` (None for parametric), in its shuffled order."""
    check_scenario(scenario)
    if scenario == "parametric":
        return None
    gold = list(row["gold_contexts"] or [])
    if scenario == "oracle":
        shown = gold
    else:
        check_negatives(n_negatives)
        negatives = list(row["negative_contexts"] or [])[:n_negatives]
        shown = gold + negatives if scenario == "realistic" else negatives
    shown = [dict(c) for c in shown]
    random.Random(f"{seed}:{row['sample_id']}:{scenario}").shuffle(shown)
    return shown


def scenario_request(
    row: Mapping[str, Any],
    scenario: str,
    n_negatives: int = DEFAULT_NEGATIVES,
    abstention: str = prompts.DEFAULT_ABSTENTION,
    seed: int = 0,
) -> ChatRequest:
    """The request for one sample in one scenario (key ``sample_id/scenario/n``)."""
    template = prompts.eval_template(abstention)
    contexts = scenario_contexts(row, scenario, n_negatives, seed)
    n = n_negatives if scenario in ("realistic", "adversarial") else 0
    return ChatRequest(
        key=f"{row['sample_id']}/{scenario}/{n}",
        messages=prompts.build_messages(template, row["question"], row["images"], contexts),
        template=template.id,
    )


def _plan(scenarios: Sequence[str], n_negatives: int | Sequence[int]) -> list[tuple[str, int]]:
    counts = [n_negatives] if isinstance(n_negatives, int) else list(n_negatives)
    if not counts:
        raise ValueError("n_negatives is empty")
    for n in counts:
        check_negatives(n)
    plan: list[tuple[str, int]] = []
    for scenario in dict.fromkeys(scenarios):
        check_scenario(scenario)
        if scenario in ("realistic", "adversarial"):
            plan += [(scenario, n) for n in dict.fromkeys(counts)]
        else:
            plan.append((scenario, 0))
    return plan


def evaluate(
    samples: pa.Table,
    pool: Any,  # gating.client.ModelPool
    judge: Judge,
    model: str,
    scenarios: Sequence[str] = SCENARIOS,
    n_negatives: int | Sequence[int] = DEFAULT_NEGATIVES,
    abstention: str = prompts.DEFAULT_ABSTENTION,
    seed: int = 0,
    run_id: str = "",
) -> pa.Table:
    """Every answer of ``model`` on every sample in every scenario (and ``n``), graded.

    One batch for the model (cache first), then one judge batch; returns ``RESULTS`` rows.
    """
    prompts.eval_template(abstention)  # validate before any call
    plan = _plan(scenarios, n_negatives)
    rows = samples.to_pylist()
    jobs: list[tuple[dict[str, Any], str, int, int]] = []
    requests: list[ChatRequest] = []
    for row in rows:
        for scenario, n in plan:
            shown = scenario_contexts(row, scenario, n or DEFAULT_NEGATIVES, seed)
            jobs.append((row, scenario, n, len(shown or [])))
            requests.append(scenario_request(row, scenario, n or DEFAULT_NEGATIVES, abstention, seed))
    if not requests:
        return RESULTS.empty_table()
    try:
        responses = pool.client(model).chat(requests, STAGE)
    finally:
        pool.release(model)
    graded = grade_responses(judge, [(job[0], resp) for job, resp in zip(jobs, responses)], STAGE)
    out: list[dict[str, Any]] = []
    for (row, scenario, n, shown), resp in zip(jobs, responses):
        judgement = graded.get(resp.key)
        out.append({
            "sample_id": row["sample_id"], "source": row["source"], "scenario": scenario,
            "n_negatives": n, "n_contexts": shown, "model": model, "abstention": abstention,
            "answer": resp.text,
            "grade": grade_name(judgement.grade) if (resp.text is not None and judgement) else FAILED,
            "judged_by": judgement.by if judgement else None,
            "error": resp.error, "run_id": run_id,
        })
    return pa.Table.from_pylist(out, schema=RESULTS)
