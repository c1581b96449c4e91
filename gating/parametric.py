"""Stage I of DeflectionBench: parametric gating (Algorithm 1, first loop).

Every gating model answers each question with its image and no evidence. A sample stays
only if no model can answer it from what it already knows:

``gating.rule`` says which grades count as a model answering (``benchmarks.deflectionbench.RULES``):
the paper's ``all_incorrect`` keeps a sample only if every model's answer is judged
INCORRECT, so a NOT_ATTEMPTED drops it too (a model that declines has not shown that it
answers wrongly from what it knows).

The prompt (``prompts.PromptSet.parametric``) asks for a short answer and, like the paper,
nothing more: ``gating.force_guess: true`` adds "still give your single best guess", which
turns many abstentions (which drop a sample) into INCORRECT answers (which keep it).

Models run model-major (``schedule.model_major``), in pool order; a sample the rule has
already dropped is not sent to later models (early elimination).

Failures are never grades. A call that failed after retries (``text is None``) or an
answer the judge could not grade (JUDGE_ERROR) is logged with verdict ``error``; it cannot
drop the sample (nothing was learned) and cannot keep it either (the model was not shown
to fail). Later models are still asked (one of them may drop the sample for good), and if
none does, the sample's verdict is ``error``: kept out of the release, pending a rerun,
which only repeats the failed calls (the rest are cached).

Ledger rows (stage ``parametric``): ``gate.precondition`` for samples that cannot be gated
(no answers, no gold context), ``gate.answer`` per model answer (verdict = the grade, or
``error``) and ``gate.verdict`` per gated sample (``keep``/``drop``/``error``) naming the
deciding model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from mmcurate.benchmarks.deflectionbench import GatingConfig, answer_rule
from mmcurate.core.config import ModelSpec
from mmcurate.core.ledger import Decision
from mmcurate.core.stages import StageContext
from mmcurate.core.tables import rows_to_table
from mmcurate.gating import prompts
from mmcurate.gating.elimination import EliminationResult, EliminationStage
from mmcurate.judging.answers import ERROR, JUDGE_ERROR, GradedAnswers, check_models, precondition
from mmcurate.judging.recorded import RecordedAnswers
from mmcurate.models.requests import ChatRequest
from mmcurate.models.schedule import model_major

STAGE = "parametric"


def parametric_request(
    row: Mapping[str, Any], spec: ModelSpec | None = None, template: prompts.Template = prompts.PARAMETRIC
) -> ChatRequest:
    """Question + the question's images, no evidence (the client drops images for non-vision models)."""
    return ChatRequest(
        key=row["sample_id"],
        messages=prompts.build_messages(template, row["question"], row["images"], None),
        template=template.id,
    )


@dataclass
class ParametricGate(EliminationStage):
    """Stage I: keep a sample only when no gating model answers it without context."""

    gating: GatingConfig
    templates: prompts.PromptSet = prompts.BUILT_IN
    recorded: RecordedAnswers | None = None  # a re-curation: the parent release's answers
    name = STAGE

    def run(self, samples: pa.Table, ctx: StageContext) -> EliminationResult:
        pool, judge, gating, run_id = ctx.pool, ctx.judge, self.gating, ctx.run_id
        models = check_models(gating.pool)
        rule = answer_rule(gating.rule, "gating")
        drops = rule.answered
        template = self.templates.parametric(gating.force_guess)
        decisions: list[Decision] = []
        rows = samples.to_pylist()

        eligible: list[dict[str, Any]] = []
        for row in rows:
            reason = precondition(row)
            if reason is None:
                eligible.append(row)
            else:
                decisions.append(
                    Decision(row["sample_id"], STAGE, "gate.precondition", "drop", detail={"reason": reason})
                )

        dropped_by: dict[str, str] = {}  # sample_id -> model whose answer dropped it
        failed: dict[str, list[str]] = {}  # sample_id -> models whose call/grade failed
        asked: dict[str, list[str]] = {}  # sample_id -> models that answered (any outcome)

        def settle(model: str, rows: list[dict[str, Any]], verdicts: list[str]) -> None:
            for row, verdict in zip(rows, verdicts):
                sid = row["sample_id"]
                asked.setdefault(sid, []).append(model)
                if verdict in (ERROR, JUDGE_ERROR):
                    failed.setdefault(sid, []).append(model)
                elif drops(verdict) and sid not in dropped_by:
                    dropped_by[sid] = model

        answers = GradedAnswers(judge, STAGE, "gate.answer", decisions, settle, self.recorded)
        model_major(
            pool,
            models,
            eligible,
            build=lambda row, spec: parametric_request(row, spec, template),
            on_answers=answers.on_answers,
            eliminated=lambda row: row["sample_id"] in dropped_by,
            stage=STAGE,
            replay=answers.replay,
        )

        kept_rows: list[dict[str, Any]] = []
        for row in eligible:
            sid = row["sample_id"]
            if sid in dropped_by:
                model = dropped_by[sid]
                decisions.append(
                    Decision(
                        sid,
                        STAGE,
                        "gate.verdict",
                        "drop",
                        detail={
                            "deciding_model": model,
                            "rule": gating.rule,
                            "reason": rule.gate_drop.format(model=model),
                        },
                    )
                )
            elif sid in failed:
                decisions.append(
                    Decision(
                        sid,
                        STAGE,
                        "gate.verdict",
                        ERROR,
                        detail={
                            "deciding_model": failed[sid][0],
                            "failed_models": failed[sid],
                            "rule": gating.rule,
                            "reason": "no answer or no grade from some model; kept out pending a rerun",
                        },
                    )
                )
            else:
                kept_rows.append(row)
                decisions.append(
                    Decision(
                        sid,
                        STAGE,
                        "gate.verdict",
                        "keep",
                        detail={
                            "deciding_model": models[-1],
                            "models": asked.get(sid, []),
                            "rule": gating.rule,
                            "reason": "no model answered from parametric knowledge",
                        },
                    )
                )

        order = {m: i for i, m in enumerate(models)}
        drop_index = [order[m] for m in dropped_by.values()]
        convergence = [
            {"n_models": i + 1, "model": model, "retained": len(eligible) - sum(1 for d in drop_index if d <= i)}
            for i, model in enumerate(models)
        ]
        return EliminationResult(
            stage=STAGE,
            kept=rows_to_table(kept_rows, samples.schema),
            decisions=decisions,
            convergence=convergence,
            naive_calls=len(models) * len(eligible),
            requests=answers.requests,
            run_id=run_id,
            components={"judge": judge.name, "stage_i_prompt": template.id},
        )
