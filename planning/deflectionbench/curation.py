"""The plan of a DeflectionBench run: Stage I and Stage III requests per model with early
elimination, and the LLM judge on what the pre-judge cannot settle.

Per model, in pool order (``planning.plan.elimination``):

- Stage I: the gateable samples go to the first model; each model passes on the share it
  does not drop (``rates.stage1_drop``).
- Stage II makes no model call; it keeps ``rates.pairing`` of the samples.
- Stage III gold check: each model passes on what it does not settle under the oracle rule
  (the grades that count as answering, ``benchmarks.deflectionbench.AnswerRule``);
  a sample no model settles is discarded, so only the others reach the distractor check.
- Distractor check: each passing sample brings its negatives; each model passes on the
  distractors it did not answer CORRECT with.
- Judge (``judge.kind: llm``): one request per answer of every step, less the share the
  pre-judge settles (``rates.prejudge``, 0 unless a release measured it).

Requests are sized by building them with the stages' own builders on sample rows.
"""

from __future__ import annotations

from typing import Any

from mmcurate.annotation.deflectionbench.oracle import distractor_request, gold_request
from mmcurate.benchmarks.deflectionbench import MAX_NEGATIVES, PAGE_STRATEGIES, DeflectionBenchConfig
from mmcurate.core.config import Settings
from mmcurate.gating.parametric import parametric_request
from mmcurate.gating.prompts import prompt_set
from mmcurate.judging.answers import precondition
from mmcurate.judging.simpleqa import JudgeItem, judge_request

from .. import throughput
from ..inputs import PlanInput
from ..plan import Plan, PlanRow, elimination, plan_row, remaining, words
from ..rates import DISTRACTOR, GOLD, PARAMETRIC, DeflectionRates
from ..tokens import TOKEN_NOTE

STAGE_OF = {PARAMETRIC: "I", GOLD: "III", DISTRACTOR: "III"}
PAPER_QUESTION_WORDS = 12.5  # seed paper 003, Table 3
PAPER_ANSWER = "a short answer"  # the stages ask for a name, a number, a date or a short phrase
WORDS_PER_TOKEN = 0.8  # ~4 characters per token, ~5 per English word and its space


def paper_rows(section: DeflectionBenchConfig) -> list[dict[str, Any]]:
    """Ten stand-in samples shaped like the paper's (Table 3): a 12.5-word question with a
    query image, 1.9 gold passages on average (nine with two, one with one) and the
    negatives Stage II would mine (``max_text_negatives`` passages of ``chunk_size`` tokens,
    then images up to ``offered_negatives``). Used when the workdir holds no ingest."""
    retrieval = section.retrieval
    passage = words(retrieval.chunk_size * (WORDS_PER_TOKEN if retrieval.chunk_unit == "tokens" else 1))

    def context(kind: str, i: int) -> dict[str, Any]:
        if kind == "text":
            return {"context_id": f"t{i}", "modality": "text", "text": passage, "image": None, "title": "Title"}
        return {"context_id": f"i{i}", "modality": "image", "text": "A caption.", "image": f"{i:064x}", "title": None}

    offered = offered_negatives(section)
    texts = min(offered, retrieval.max_text_negatives)
    negatives = [context("text", i) for i in range(texts)] + [context("image", i) for i in range(offered - texts)]
    return [
        {
            "sample_id": f"paper-{n}",
            "source": "paper",
            "source_id": str(n),
            "question": words(PAPER_QUESTION_WORDS) + "?",
            "answers": [PAPER_ANSWER],
            "images": [f"{0:064x}"],
            "gold_contexts": [context("text", 100 + g) for g in range(1 if n == 0 else 2)],
            "negative_contexts": negatives,
            "meta": "{}",
        }
        for n in range(10)
    ]


def offered_negatives(section: DeflectionBenchConfig) -> int:
    """Negatives Stage II offers a sample it mines for: the most any source's strategy offers
    (passages of the KB's pages, or images of its own pool), capped as Stage II caps them."""
    offers = [
        section.retrieval.max_text_negatives if mining.strategy in PAGE_STRATEGIES else mining.top_k
        for mining in section.mining.values()
        if mining.strategy != "source"
    ]
    return min(MAX_NEGATIVES, max(offers, default=0))


def _negatives(row: dict[str, Any], section: DeflectionBenchConfig) -> list[dict[str, Any]]:
    """The row's own negatives, or (before mining) stand-ins shaped like what Stage II mines."""
    return row["negative_contexts"] or paper_rows(section)[0]["negative_contexts"]


def plan_deflectionbench(settings: Settings, given: PlanInput, rates: DeflectionRates, oracle_rule: str) -> Plan:
    cfg = DeflectionBenchConfig.of(settings)
    pool = [settings.model(name) for name in cfg.gating.pool]
    k = len(pool)
    rows = [r for r in given.rows if precondition(r) is None] or paper_rows(cfg)
    how = (
        given.how if given.rows else given.how + "; no ingest in the workdir: requests shaped like the paper's samples"
    )
    negatives = rates.negatives if rates.negatives is not None else offered_negatives(cfg)

    gated = given.samples * rates.eligible
    after_i = remaining(gated, rates.stage1_drop, k)
    after_ii = after_i * rates.pairing
    checked = after_ii * rates.gold_eligible
    passing = checked - remaining(checked, rates.gold_settle, k)
    asked = {
        PARAMETRIC: elimination(gated, rates.stage1_drop, k),
        GOLD: elimination(checked, rates.gold_settle, k),
        DISTRACTOR: elimination(passing * negatives, rates.leak, k),
    }
    templates, guess = prompt_set(cfg.prompts), cfg.gating.force_guess
    parametric, evidence = templates.parametric(guess), templates.evidence(guess)
    examples = {
        PARAMETRIC: lambda: [parametric_request(r, template=parametric) for r in rows],
        GOLD: lambda: [gold_request(r, template=evidence) for r in rows],
        DISTRACTOR: lambda: [distractor_request(r, n, evidence) for r in rows for n in _negatives(r, cfg)],
    }
    judge = settings.model(settings.judge.model) if settings.judge.kind == "llm" and settings.judge.model else None
    judged = [
        judge_request(JudgeItem(r["sample_id"], r["question"], list(r["answers"]), r["answers"][0])) for r in rows
    ]  # the judged answer sized as the gold answer: the stages ask for short answers
    plan_rows: list[PlanRow] = []
    for step, per_model in asked.items():
        built = examples[step]()
        for spec, requests in zip(pool, per_model):
            plan_rows.append(
                plan_row(STAGE_OF[step], step, spec, requests, built, rates.completion.get(f"{step}/{spec.name}"))
            )
        if judge is not None:
            plan_rows.append(
                plan_row(
                    STAGE_OF[step],
                    step,
                    judge,
                    sum(per_model) * (1 - rates.prejudge.get(step, 0.0)),
                    judged,
                    rates.completion.get(f"{step}/{judge.name}"),
                )
            )
    notes = [f"oracle rule: {oracle_rule}; negatives per sample at the distractor check: {negatives:.1f}"]
    if judge is not None:
        shares = ", ".join(f"{step} {share:.0%}" for step, share in rates.prejudge.items()) or "none measured"
        notes.append(
            f"judge: {judge.name} on what the pre-judge does not settle (pre-judge share: {shares}); "
            "the judged answer is sized as the sample's gold answer; unparsable-reply retries are not counted"
        )
    notes.append(f"{TOKEN_NOTE}; completion = max_tokens unless a release measured it")
    return Plan(
        benchmark="deflectionbench",
        samples=given.samples,
        samples_from=how,
        rates_from=rates.source,
        funnel=[
            ("candidates", given.samples),
            ("after Stage I", after_i),
            ("after Stage II", after_ii),
            ("released", passing * rates.kmin_pass),
        ],
        rows=plan_rows,
        notes=notes,
        sources={spec.name: throughput.throughput(spec)[1] for spec in [*pool, *([judge] if judge else [])]},
    )
