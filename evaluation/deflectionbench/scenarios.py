"""The four-scenario evaluation protocol of VLM-DeflectionBench.

For one sample and one model, the scenario decides which evidence comes with the question:

- ``parametric``: none (no evidence section at all);
- ``oracle``: the gold contexts only;
- ``realistic``: the gold contexts plus ``n`` negatives (default 2, 1..``MAX_NEGATIVES``, 20: the most a
  sample keeps);
- ``adversarial``: ``n`` negatives only, no gold.

Negatives are taken from the top of the sample's ``negative_contexts`` (the pairing
order: source order, or the miner's ranking), so the sets for growing ``n`` are nested and
a sweep over ``n`` changes one thing at a time. The contexts shown are then shuffled with
``random.Random(f"{seed}:{sample_id}:{scenario}")``: the same seed gives the same order in
every run, on every machine. A sample with fewer negatives than asked shows what it has;
``n_contexts`` in the results records how many contexts were really shown.

The negative-modality analysis (the paper's Table 5) reruns the realistic scenario with
negatives of one modality: ``text`` or ``image`` (the first ``n`` of that modality) or
``multimodal`` (the first ceil(n/2) text and floor(n/2) image negatives), at n = 2 as in
Table 4. Only samples whose gold is all text or all image and which have ``n`` negatives
of each modality take part, so the three negative settings compare the same samples. The
ranked setting (the default, any modality) is ``negatives="ranked"``.

The prompt (``prompts.PromptSet.evaluation``) is the paper's shape (seed 003, Appendix I): a
system prompt saying the model may be given text, images or both, and the user turn ending
with an abstention level that asks for the answer: none (only that; the strictness sweep's
baseline), soft, moderate (the default) or severe (which demands the exact refusal "I cannot
answer this question."). The texts are built in or come from the config's prompt-template
file (``templates``); verify-first answers with the built-in ones only. Results
keep failed calls (grade ``FAILED``, with the error) and ungradable answers
(``JUDGE_ERROR``) as rows: ``metrics`` counts them apart. A result row is identified by
(model, sample_id, scenario, n_negatives, negatives, abstention).

The answering system (``system``) is ``plain`` (one call per item, the request above) or
``verify-first`` (CRUISE's gate, ``evaluation.verify_first``, given the scenario's contexts
as the evidence it may use; its answer with context is the plain request). Both write the
same rows, graded by the same judge; verify-first fills the gate columns (router flags,
consistency, confidence, why, the check that could not be read, the whole trace as JSON),
which stay null for plain.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from mmcurate.benchmarks import register_part
from mmcurate.benchmarks.deflectionbench import MAX_NEGATIVES, TABLE4_NEGATIVES
from mmcurate.gating import prompts
from mmcurate.judging.answers import grade_name, grade_responses
from mmcurate.judging.simpleqa import Judge
from mmcurate.models.requests import ChatRequest, ChatResponse

from ..failures import EvaluationError
from ..runs import PLAIN
from ..verify_first import SYSTEM_NAME as VERIFY_FIRST
from ..verify_first import VerifyFirst, verify_first_answers

SCENARIOS = ("parametric", "oracle", "realistic", "adversarial")
DEFAULT_NEGATIVES = TABLE4_NEGATIVES  # Table 4's n (its caption); evaluation.deflectionbench.table_negatives
# the n a run asks by default: Figure 3 varies it from 1 to 10 (003, 4.5); Table 4 reads n = 2 of them
DEFAULT_NEGATIVE_COUNTS = (1, 2, 5, 10)
RANKED = "ranked"  # negatives of any modality, in pairing order
NEGATIVE_MODALITIES = ("text", "image", "multimodal")  # Table 5's negative settings
MODALITY_NEGATIVES = DEFAULT_NEGATIVES  # n of the negative-modality analysis (Table 4's n)
GOLD_MODALITIES = ("text", "image")  # Table 5's positive settings; "mixed" and "none" sit out
FAILED = "FAILED"  # grade column of a call that failed for good (never a judge grade)
STAGE = "evaluate"
SYSTEMS = (PLAIN, VERIFY_FIRST)

RESULTS = pa.schema(
    [
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("scenario", pa.string(), nullable=False),
        pa.field("n_negatives", pa.int32(), nullable=False),  # asked for (0: parametric/oracle)
        pa.field("n_contexts", pa.int32(), nullable=False),  # contexts actually shown
        pa.field("negatives", pa.string(), nullable=False),  # "ranked" or a Table-5 modality setting
        pa.field("gold_modality", pa.string(), nullable=False),  # text, image, mixed or none
        pa.field("model", pa.string(), nullable=False),
        pa.field("abstention", pa.string(), nullable=False),
        pa.field("answer", pa.string()),
        pa.field("grade", pa.string(), nullable=False),  # a judge grade, or FAILED
        pa.field("judged_by", pa.string()),
        pa.field("error", pa.string()),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("system", pa.string()),  # plain or verify-first (the answering system)
        # verify-first's gate (null for plain; a flag is null when its check did not run or was unreadable)
        pa.field("needs_outside_knowledge", pa.bool_()),
        pa.field("time_sensitive", pa.bool_()),
        pa.field("consistent", pa.bool_()),
        pa.field("confidence", pa.float64()),
        pa.field("abstained", pa.bool_()),  # the gate answered "I don't know"
        pa.field("gate_reason", pa.string()),
        pa.field("gate_error", pa.string()),
        pa.field("trace", pa.string()),  # JSON: every check that ran, its reply, the decision
    ]
)
GATE_COLUMNS = (
    "needs_outside_knowledge",
    "time_sensitive",
    "consistent",
    "confidence",
    "abstained",
    "gate_reason",
    "gate_error",
    "trace",
)


def check_scenario(scenario: str) -> None:
    if scenario not in SCENARIOS:
        raise EvaluationError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")


def check_system(system: str) -> None:
    if system not in SYSTEMS:
        raise EvaluationError(f"unknown answering system {system!r}; known: {', '.join(SYSTEMS)}")


def check_negatives(n: int) -> None:
    if not 1 <= n <= MAX_NEGATIVES:
        raise EvaluationError(f"number of negatives must be in 1..{MAX_NEGATIVES}, got {n}")


def gold_modality(row: Mapping[str, Any]) -> str:
    """``text`` or ``image`` when every gold context has that modality, else mixed / none."""
    kinds = {c["modality"] for c in row["gold_contexts"] or []}
    return kinds.pop() if len(kinds) == 1 else ("mixed" if kinds else "none")


def modality_eligible(row: Mapping[str, Any], n: int = MODALITY_NEGATIVES) -> bool:
    """Can the sample take part in the negative-modality analysis (see the module docstring)?"""
    negatives = [c["modality"] for c in row["negative_contexts"] or []]
    return gold_modality(row) in GOLD_MODALITIES and negatives.count("text") >= n and negatives.count("image") >= n


def _negatives(row: Mapping[str, Any], n: int, negatives: str) -> list[dict[str, Any]]:
    ranked = list(row["negative_contexts"] or [])
    if negatives == RANKED:
        return ranked[:n]
    text = [c for c in ranked if c["modality"] == "text"]
    image = [c for c in ranked if c["modality"] == "image"]
    if negatives == "text":
        return text[:n]
    if negatives == "image":
        return image[:n]
    return text[: n - n // 2] + image[: n // 2]


def scenario_contexts(
    row: Mapping[str, Any],
    scenario: str,
    n_negatives: int = DEFAULT_NEGATIVES,
    seed: int = 0,
    negatives: str = RANKED,
) -> list[dict[str, Any]] | None:
    """The evidence shown in ``scenario`` (None for parametric), in its shuffled order."""
    check_scenario(scenario)
    if negatives != RANKED and (scenario != "realistic" or negatives not in NEGATIVE_MODALITIES):
        raise EvaluationError(
            f"negatives {negatives!r}: the modality analysis runs the realistic scenario with "
            f"{', '.join(NEGATIVE_MODALITIES)} negatives"
        )
    if scenario == "parametric":
        return None
    gold = list(row["gold_contexts"] or [])
    if scenario == "oracle":
        shown = gold
    else:
        check_negatives(n_negatives)
        chosen = _negatives(row, n_negatives, negatives)
        shown = gold + chosen if scenario == "realistic" else chosen
    shown = [dict(c) for c in shown]
    order = f"{seed}:{row['sample_id']}:{scenario}" + ("" if negatives == RANKED else f":{negatives}")
    random.Random(order).shuffle(shown)
    return shown


@dataclass(frozen=True)
class Job:
    """One answer asked of the model per sample: scenario, negatives and abstention level."""

    scenario: str
    n: int  # negatives asked for (0: parametric/oracle)
    negatives: str = RANKED
    abstention: str = prompts.DEFAULT_ABSTENTION

    def key(self, sample_id: str) -> str:
        return f"{sample_id}/{self.scenario}/{self.n}/{self.negatives}/{self.abstention}"


def scenario_request(
    row: Mapping[str, Any],
    scenario: str,
    n_negatives: int = DEFAULT_NEGATIVES,
    abstention: str = prompts.DEFAULT_ABSTENTION,
    seed: int = 0,
    negatives: str = RANKED,
    templates: prompts.PromptSet = prompts.BUILT_IN,
) -> ChatRequest:
    """The request for one sample in one scenario (key ``Job.key``)."""
    template = templates.evaluation(abstention)
    contexts = scenario_contexts(row, scenario, n_negatives, seed, negatives)
    n = n_negatives if scenario in ("realistic", "adversarial") else 0
    return ChatRequest(
        key=Job(scenario, n, negatives, abstention).key(row["sample_id"]),
        messages=prompts.build_messages(template, row["question"], row["images"], contexts),
        template=template.id,
    )


@register_part("deflectionbench", "evaluation_check")
def run_options(given: dict[str, Any]) -> dict[str, Any]:
    """The options of a four-scenario run from what the user gave (``scenarios``,
    ``n_negatives``, ``abstention``, ``strictness_sweep``, ``modality_analysis``, ``system``),
    completed with the defaults and checked: a bad value raises before any flow starts."""
    if given.get("strictness_sweep") and given.get("abstention"):
        raise EvaluationError("give --abstention levels or --strictness-sweep, not both")
    options: dict[str, Any] = {
        "scenarios": list(given.get("scenarios") or SCENARIOS),
        "n_negatives": list(given.get("n_negatives") or DEFAULT_NEGATIVE_COUNTS),
        "abstention": (
            list(prompts.STRICTNESS_LEVELS)
            if given.get("strictness_sweep")
            else list(given.get("abstention") or [prompts.DEFAULT_ABSTENTION])
        ),
        "modality_analysis": bool(given.get("modality_analysis")),
        "system": given.get("system") or PLAIN,
    }
    check_system(options["system"])
    plan_jobs(options["scenarios"], options["n_negatives"], options["abstention"], options["modality_analysis"])
    return options


def plan_jobs(
    scenarios: Sequence[str],
    n_negatives: int | Sequence[int] = DEFAULT_NEGATIVES,
    abstentions: str | Sequence[str] = prompts.DEFAULT_ABSTENTION,
    modality_analysis: bool = False,
) -> list[Job]:
    """Every job of a run, validated (a bad value raises EvaluationError before any call)."""
    counts = [n_negatives] if isinstance(n_negatives, int) else list(n_negatives)
    levels = [abstentions] if isinstance(abstentions, str) else list(abstentions)
    if not counts:
        raise EvaluationError("n_negatives is empty")
    if not levels:
        raise EvaluationError("no abstention level given")
    if not scenarios:
        raise EvaluationError("no scenario given")
    for n in counts:
        check_negatives(n)
    for level in levels:
        prompts.check_abstention(level)
    for scenario in scenarios:
        check_scenario(scenario)
    jobs: list[Job] = []
    for level in dict.fromkeys(levels):
        for scenario in dict.fromkeys(scenarios):
            if scenario in ("realistic", "adversarial"):
                jobs += [Job(scenario, n, RANKED, level) for n in dict.fromkeys(counts)]
            else:
                jobs.append(Job(scenario, 0, RANKED, level))
        if modality_analysis:
            jobs += [Job("realistic", MODALITY_NEGATIVES, mode, level) for mode in NEGATIVE_MODALITIES]
    return jobs


def _flag(check: dict[str, Any] | None) -> bool | None:
    """A yes/no check of the trace as a bool (None: not run or unreadable)."""
    return None if not check or check.get("error") or check.get("label") is None else check["label"] == "yes"


def _gate_columns(answer: Mapping[str, Any]) -> dict[str, Any]:
    """The gate columns of a ``verify_first.ANSWERS`` row."""
    trace = json.loads(answer["trace"])
    router = trace.get("router", {})
    confidence = trace.get("confidence", {})
    return {
        "needs_outside_knowledge": _flag(router.get("needs_outside_knowledge")),
        "time_sensitive": _flag(router.get("time_sensitive")),
        "consistent": _flag(trace.get("consistency")),
        "confidence": None if confidence.get("error") else confidence.get("label"),
        "abstained": answer["abstained"],
        "gate_reason": answer["reason"],
        "gate_error": answer["gate_error"],
        "trace": answer["trace"],
    }


Asked = tuple[dict[str, Any], Job, int, list[dict[str, Any]] | None]  # row, job, n asked, contexts shown


def _plain(
    asked: list[Asked], pool: Any, model: str, seed: int, templates: prompts.PromptSet
) -> list[tuple[ChatResponse, dict[str, Any]]]:
    requests = [
        scenario_request(row, job.scenario, n, job.abstention, seed, job.negatives, templates)
        for row, job, n, _ in asked
    ]
    try:
        responses = pool.client(model).chat(requests, STAGE)
    finally:
        pool.release(model)
    return [(resp, dict.fromkeys(GATE_COLUMNS)) for resp in responses]


def _verify_first(
    asked: list[Asked], pool: Any, model: str, system: VerifyFirst | None = None
) -> list[tuple[ChatResponse, dict[str, Any]]]:
    """Verify-first's answer to each item, the evidence it may use being the scenario's
    contexts; one system run per abstention level (the answering prompt's); ``system`` gives
    the router and the verifier (default: the model itself)."""
    out: list[tuple[ChatResponse, dict[str, Any]] | None] = [None] * len(asked)
    for level in dict.fromkeys(job.abstention for _, job, _, _ in asked):
        mine = [i for i, (_, job, _, _) in enumerate(asked) if job.abstention == level]
        answers = verify_first_answers(
            [asked[i][0] for i in mine],
            [asked[i][3] for i in mine],
            pool,
            replace(system or VerifyFirst(model), model=model, abstention=level),
            keys=[asked[i][1].key(asked[i][0]["sample_id"]) for i in mine],
            stage=STAGE,
        )
        for i, answer in zip(mine, answers.to_pylist()):
            out[i] = (
                ChatResponse(answer["key"], model, answer["answer"], answer["error"], cached=False, latency=0.0),
                _gate_columns(answer),
            )
    return out  # type: ignore[return-value]


def evaluate(
    samples: pa.Table,
    pool: Any,  # models.client.ModelPool
    judge: Judge,
    model: str,
    scenarios: Sequence[str] = SCENARIOS,
    n_negatives: int | Sequence[int] = DEFAULT_NEGATIVES,
    abstention: str | Sequence[str] = prompts.DEFAULT_ABSTENTION,
    seed: int = 0,
    run_id: str = "",
    modality_analysis: bool = False,
    system: str = PLAIN,
    templates: prompts.PromptSet = prompts.BUILT_IN,
    verify_first: VerifyFirst | None = None,
) -> pa.Table:
    """Every answer of ``model`` (answering as ``system``) on every sample for every job of
    the plan, graded.

    ``abstention`` may list several levels (the strictness sweep); ``modality_analysis``
    adds the realistic runs with text / image / multimodal negatives for the samples that
    can take part. The model's batches (cache first), then one judge batch; returns
    ``RESULTS`` rows.
    """
    check_system(system)
    jobs = plan_jobs(scenarios, n_negatives, abstention, modality_analysis)
    if system != PLAIN and any(
        templates.evaluation(job.abstention) != prompts.BUILT_IN.evaluation(job.abstention) for job in jobs
    ):
        raise EvaluationError(
            f"--system {system} answers with the built-in prompt templates; "
            f"the config's prompt templates ({templates.source}) apply to the plain system only"
        )
    asked: list[Asked] = []
    for row in samples.to_pylist():
        eligible = modality_eligible(row)
        for job in jobs:
            if job.negatives != RANKED and not eligible:
                continue
            n = job.n or DEFAULT_NEGATIVES
            asked.append((row, job, n, scenario_contexts(row, job.scenario, n, seed, job.negatives)))
    if not asked:
        return RESULTS.empty_table()
    answered = (
        _plain(asked, pool, model, seed, templates)
        if system == PLAIN
        else _verify_first(asked, pool, model, verify_first)
    )
    graded = grade_responses(judge, [(row, resp) for (row, _, _, _), (resp, _) in zip(asked, answered)], STAGE)
    out: list[dict[str, Any]] = []
    for (row, job, _, shown), (resp, gate) in zip(asked, answered):
        judgement = graded.get(resp.key)
        out.append(
            {
                "sample_id": row["sample_id"],
                "source": row["source"],
                "scenario": job.scenario,
                "n_negatives": job.n,
                "n_contexts": len(shown or []),
                "negatives": job.negatives,
                "gold_modality": gold_modality(row),
                "model": model,
                "abstention": job.abstention,
                "answer": resp.text,
                "grade": grade_name(judgement.grade) if (resp.text is not None and judgement) else FAILED,
                "judged_by": judgement.by if judgement else None,
                "error": resp.error,
                "run_id": run_id,
                "system": system,
                **gate,
            }
        )
    return pa.Table.from_pylist(out, schema=RESULTS)
