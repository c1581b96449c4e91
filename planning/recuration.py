"""The bill of a re-curation before it runs, and the budget it must stay within.

A re-curation asks only the models it adds (the original models' answers are read from the
parent's ledger, ``judging.recorded``), about the samples the parent release holds, so its
requests are counted from the release itself, with the stages' own request builders:

- DeflectionBench: each added gating model answers every released sample without context
  (Stage I); the gold check reaches it only for samples no reusable model's recorded
  answer settles under the oracle rule (for a release made with the same rule: none); the
  distractor check asks it about every released negative;
- RefLVQA: each added inspector answers every released question (plus the evaluator's
  grade when the evaluator is a model); a new text entailment model judges every
  (sentence, document) pair the parent's ledger records as judged;
- ReflectV: a re-checking teacher scores every turn of each released dialogue; a
  re-checking verifier looks at every marked turn of each released chain.

The counts are an upper bound: the added models' own early elimination (a sample one drops
is not sent to the next, nor to the later stages) is not modelled. Tokens, device-hours
and cost come from ``planning.plan`` and each model's throughput and prices
(``planning.throughput``). An LLM judge adds one request per answer it grades.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mmcurate.annotation.deflectionbench.oracle import distractor_request, gold_request
from mmcurate.annotation.reflectv.dialogue import TEACHER_TEMPLATE, teacher_messages
from mmcurate.annotation.reflectv.visual import SYSTEM, TEMPLATE, verify_prompt
from mmcurate.annotation.reflvqa.citations import STAGE as CITATION
from mmcurate.annotation.reflvqa.necessity import STAGE as NECESSITY
from mmcurate.annotation.reflvqa.necessity import grade_request, inspector_request
from mmcurate.annotation.reflvqa.recheck import judged_candidates
from mmcurate.benchmarks import register_part
from mmcurate.benchmarks.deflectionbench import answer_rule
from mmcurate.core.errors import ConfigError
from mmcurate.core.plural import counted, listed
from mmcurate.core.specs import LLM, ModelRef
from mmcurate.gating.parametric import parametric_request
from mmcurate.judging.answers import CORRECT, INCORRECT, NOT_ATTEMPTED, precondition
from mmcurate.judging.entailment import DOC_CHARS, text_support_request
from mmcurate.judging.recorded import RecordedAnswers
from mmcurate.judging.simpleqa import JudgeItem, judge_request
from mmcurate.models.labels import label_request
from mmcurate.models.requests import ChatRequest
from mmcurate.releases.errors import ReleaseError
from mmcurate.releases.recuration import Recuration

from .plan import UNKNOWN_COST, Plan, PlanRow, plan_row, throughput_sources, words
from .tokens import CHARS_PER_TOKEN

GRADES = (CORRECT, INCORRECT, NOT_ATTEMPTED)


@dataclass(frozen=True)
class Budget:
    """The most a re-curation may spend; None: no limit."""

    max_calls: int | None = None
    max_cost: float | None = None

    def __post_init__(self) -> None:
        if self.max_calls is not None and self.max_calls < 0:
            raise ConfigError(f"--max-calls must be >= 0, got {self.max_calls}")
        if self.max_cost is not None and self.max_cost < 0:
            raise ConfigError(f"--max-cost must be >= 0, got {self.max_cost}")

    def refuse_over(self, plan: Plan) -> None:
        """One line when ``plan`` needs more than this budget (before anything is called)."""
        total = plan.total()
        if self.max_calls is not None and total.requests > self.max_calls:
            raise ReleaseError(
                f"re-curating {plan.benchmark} needs about {total.requests:,.0f} model calls, over "
                f"--max-calls {self.max_calls:,}: nothing was called"
            )
        if self.max_cost is not None and total.cost is None:
            raise ReleaseError(
                f"re-curating {plan.benchmark}: {UNKNOWN_COST} for {listed(plan.unpriced())}, so "
                f"--max-cost ${self.max_cost:,.2f} cannot be checked; set their price_input_per_mtok "
                "and price_output_per_mtok: nothing was called"
            )
        if self.max_cost is not None and total.cost is not None and total.cost > self.max_cost:
            raise ReleaseError(
                f"re-curating {plan.benchmark} costs about ${total.cost:,.2f}, over --max-cost "
                f"${self.max_cost:,.2f}: nothing was called"
            )


def sha_images(row: dict[str, Any]) -> dict[str, Any]:
    """A release row with embedded images as their sha256 (the store's names), as requests hold them."""

    def sha(image: Any) -> Any:
        return str(image["path"]).split(".")[0] if isinstance(image, dict) else image

    out = dict(row)
    if "images" in out:
        out["images"] = [sha(i) for i in out["images"] or []]
    for name in ("gold_contexts", "negative_contexts"):
        if name in out:
            out[name] = [{**c, "image": sha(c.get("image"))} for c in out[name] or []]
    return out


def judged(run: Recuration, stage: str, step: str, requests: float, rows: list[dict[str, Any]]) -> list[PlanRow]:
    """The LLM judge's row for ``requests`` graded answers (none for the lexical judge)."""
    settings = run.settings
    if settings.judge.kind != "llm" or not settings.judge.model or not requests:
        return []
    items = [judge_request(JudgeItem(r["sample_id"], r["question"], list(r["answers"]), r["answers"][0])) for r in rows]
    return [plan_row(stage, step, settings.model(settings.judge.model), requests, items)]


def plan_of(run: Recuration, rows: list[PlanRow], samples: int, notes: list[str]) -> Plan:
    return Plan(
        benchmark=run.parent.benchmark,
        samples=samples,
        samples_from=f"release {run.parent.version}",
        rates_from="re-curation: only the added models are asked (upper bound: their own early elimination "
        "is not modelled)",
        funnel=[(f"in {run.parent.version}", samples)],
        rows=rows,
        notes=[
            f"added: {', '.join(run.new_models)}; answers reused from the ledger: {', '.join(run.reusable) or 'none'}",
            *notes,
        ],
        sources=throughput_sources(run.settings, rows),
    )


@register_part("deflectionbench", "recuration_plan")
def deflection_recuration(run: Recuration) -> Plan:
    """DeflectionBench (see the module docstring)."""
    cfg = run.section
    rows = [sha_images(r) for r in run.parent.table(run.parent.samples_config).to_pylist()]
    rows = [r for r in rows if precondition(r) is None]
    keeps = answer_rule(cfg.gating.oracle_rule, "oracle").answered
    recorded = run.recorded("oracle", GRADES)
    settled = {sid for model in recorded.models for sid in _settled_gold(recorded, model, rows, keeps)}
    unsettled = [r for r in rows if r["sample_id"] not in settled]
    negatives = sum(len(r["negative_contexts"]) for r in rows)
    out: list[PlanRow] = []
    for name in run.added.get("gating", []):
        spec = run.settings.model(name)
        steps = [
            ("I", "parametric", len(rows), [parametric_request(r) for r in rows]),
            ("III", "oracle.gold", len(unsettled), [gold_request(r) for r in unsettled or rows]),
            (
                "III",
                "oracle.distractor",
                negatives,
                [distractor_request(r, n) for r in rows for n in r["negative_contexts"]],
            ),
        ]
        for stage, step, requests, examples in steps:
            if requests and examples:
                out.append(plan_row(stage, step, spec, requests, examples))
                out += judged(run, stage, step, requests, rows)
    return plan_of(
        run,
        out,
        len(rows),
        [
            f"{counted(len(unsettled), 'sample')} whose gold check no recorded answer settles; "
            f"{counted(negatives, 'released negative')}"
        ],
    )


def _settled_gold(
    recorded: RecordedAnswers, model: str, rows: list[dict[str, Any]], keeps: Callable[[str], bool]
) -> set[str]:
    """Samples whose gold check ``model``'s recorded answer settles."""
    return {
        r["sample_id"]
        for r in rows
        if (hit := recorded.lookup("oracle.gold", model, (r["sample_id"], None))) and keeps(hit[0])
    }


@register_part("reflvqa", "recuration_plan")
def reflvqa_recuration(run: Recuration) -> Plan:
    """RefLVQA (see the module docstring)."""
    cfg, settings = run.section, run.settings
    rows = [{**r, "answers": [r["answer"]]} for r in run.parent.table("qa").to_pylist()]
    out: list[PlanRow] = []
    for name in run.added.get("inspector", []):
        spec = settings.model(name)
        out.append(plan_row(NECESSITY, NECESSITY, spec, len(rows), [inspector_request(r) for r in rows]))
        if isinstance(cfg.evaluator, ModelRef):
            answers = [grade_request(r, name, r["answer"][: spec.max_tokens * CHARS_PER_TOKEN]) for r in rows]
            out.append(plan_row(NECESSITY, NECESSITY, settings.model(cfg.evaluator.name), len(rows), answers))
    pairs = sum(len(docs) for docs in judged_candidates(run.parent.ledger).values())
    if run.added.get("text_entailment") and isinstance(cfg.text_entailment, LLM) and pairs:
        sentences = [(r, s) for r in rows for s in r["sentences"] if s["fact_checkable"]] or [
            (rows[0], {"index": 0, "text": rows[0]["answer"]})
        ]
        premise = words(DOC_CHARS / 5)
        out.append(
            plan_row(
                CITATION,
                CITATION,
                settings.model(cfg.text_entailment.model),
                pairs,
                [text_support_request(f"{r['sample_id']}/s{s['index']}", premise, s["text"]) for r, s in sentences],
            )
        )
    return plan_of(run, out, len(rows), [f"{pairs} (sentence, document) pairs {run.parent.version} judged"])


@register_part("reflectv", "recuration_plan")
def reflectv_recuration(run: Recuration) -> Plan:
    """ReflectV (see the module docstring)."""
    rows = [
        {**r, "image": sha_images({"images": [r["image"]]})["images"][0]}
        for r in run.parent.table("trajectories").to_pylist()
    ]
    dialogues = {r["sample_id"]: r["dialogue"] for r in run.parent.table("dialogues").to_pylist()}
    turns = sum(len(dialogues[r["sample_id"]]) for r in rows)
    marked = sum(len(r["conversation"]) - 1 for r in rows if r["format"] == "multi_turn")
    out: list[PlanRow] = []
    for name in run.added.get("teacher", []):
        examples = [
            ChatRequest(
                r["sample_id"],
                teacher_messages(
                    r["question"],
                    r["answers"],
                    r["image"],
                    dialogues[r["sample_id"]][:-1],
                    dialogues[r["sample_id"]][-1]["answer"],
                ),
                TEACHER_TEMPLATE,
            )
            for r in rows
        ]
        out.append(plan_row("recheck", "recheck", run.settings.model(name), turns, examples))
    for name in run.added.get("verifier", []):
        prompt = verify_prompt("a question", "a reflection", "an anchor", "red", "point", 1)
        examples = [
            label_request(
                r["sample_id"],
                SYSTEM,
                [{"type": "image", "sha256": r["image"]}, {"type": "text", "text": prompt}],
                TEMPLATE,
            )
            for r in rows
        ]
        if marked:
            out.append(plan_row("recheck", "recheck", run.settings.model(name), marked, examples))
    return plan_of(run, out, len(rows), [f"{turns} dialogue turns to score, {marked} marked turns to check"])
