"""Stage III of DeflectionBench: quality control with oracle checks (Algorithm 1, third step).

The prompt (``prompts.PromptSet.evidence``) asks for a short answer from the evidence and,
like the paper, nothing more; ``force_guess`` adds "still give your single best guess".

(a) Gold check (solvability, the paper's eq. 4). Each model answers with the gold contexts
    only (passages as text parts with their titles, gold images as image parts). The rule
    that reads the grades is ``oracle_rule`` (named in the manifest with the config; its
    readings, ``all_incorrect`` of eq. 4 by default and ``none_correct`` of the appendix
    pseudo-code, are ``benchmarks.deflectionbench.RULES``): the first model whose grade counts
    as answering under it settles the sample, which is kept; a sample no model settles is
    discarded. A settled sample is not sent to later models (early elimination).
(b) Distractor check (eq. 5), for samples that pass (a). For each negative context, each
    model answers with that distractor alone. A distractor that lets any model answer
    CORRECT leaks the answer and is removed; later models are not asked about it. Items are
    (sample, context) pairs, run model-major.
(c) Samples left with fewer than ``k_min`` negatives are discarded.

Failures are treated conservatively; a failed call (``text is None``) or an ungradable
answer (JUDGE_ERROR) is logged with verdict ``error`` and is never a grade:
- gold check: if no model settled the sample but some failed, the sample is not discarded
  (that was not shown) but kept out with verdict ``error``, pending a rerun;
- distractor check: a distractor whose check failed for some model (and that no model
  answered) is not certified clean, so it is removed with verdict ``error``;
- k_min: if too few clean negatives remain and some were removed by an ``error``, the
  sample's verdict is ``error`` (a rerun may restore them), else ``drop``.

The naive count (``naive_calls``) is what Algorithm 1 without early elimination asks: every
model on every sample's gold set, then every model on every distractor of the samples that
passed the gold check (the naive algorithm never checks distractors of discarded samples).

Ledger rows (stage ``oracle``): ``oracle.precondition`` (no gold context, no answers);
``oracle.gold`` per model answer (verdict = grade or ``error``); ``oracle.distractor`` per
model answer with ``context_id`` and, with no model, one row per distractor
(``keep``/``remove``/``error``); ``oracle.k_min`` per sample reaching (c); and
``oracle.verdict`` (``keep``/``drop``/``error``) for every sample that had gold.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from mmcurate.benchmarks.deflectionbench import Rule, answer_rule
from mmcurate.core.config import ModelSpec
from mmcurate.core.ledger import Decision
from mmcurate.core.plural import counted
from mmcurate.core.stages import StageContext
from mmcurate.core.tables import rows_to_table
from mmcurate.gating import prompts
from mmcurate.gating.elimination import EliminationResult, EliminationStage
from mmcurate.judging.answers import (
    CORRECT,
    ERROR,
    JUDGE_ERROR,
    GradedAnswers,
    check_models,
    precondition,
)
from mmcurate.judging.recorded import RecordedAnswers
from mmcurate.models.requests import ChatRequest
from mmcurate.models.schedule import model_major

STAGE = "oracle"

Pair = tuple[str, int]  # (sample_id, index into the sample's negative_contexts)


def evidence_request(
    key: str,
    row: Mapping[str, Any],
    contexts: list[Mapping[str, Any]],
    template: prompts.Template = prompts.WITH_EVIDENCE,
) -> ChatRequest:
    return ChatRequest(
        key=key,
        messages=prompts.build_messages(template, row["question"], row["images"], contexts),
        template=template.id,
    )


def gold_request(
    row: Mapping[str, Any], spec: ModelSpec | None = None, template: prompts.Template = prompts.WITH_EVIDENCE
) -> ChatRequest:
    return evidence_request(row["sample_id"], row, row["gold_contexts"], template)


def distractor_request(
    row: Mapping[str, Any], negative: Mapping[str, Any], template: prompts.Template = prompts.WITH_EVIDENCE
) -> ChatRequest:
    return evidence_request(f"{row['sample_id']}/{negative['context_id']}", row, [negative], template)


@dataclass
class OracleCheck(EliminationStage):
    """Stage III: gold check, distractor pruning, k_min (see the module docstring)."""

    models: list[str]
    k_min: int
    rule: Rule = "all_incorrect"
    force_guess: bool = False
    templates: prompts.PromptSet = prompts.BUILT_IN
    recorded: RecordedAnswers | None = None  # a re-curation: the parent release's answers
    name = STAGE

    def run(self, samples: pa.Table, ctx: StageContext) -> EliminationResult:
        pool, judge, models, k_min, run_id = ctx.pool, ctx.judge, self.models, self.k_min, ctx.run_id
        models = check_models(models)
        rule = answer_rule(self.rule, "oracle")
        keeps = rule.answered  # a grade given the gold evidence that keeps the sample
        template = self.templates.evidence(self.force_guess)
        if k_min < 0:
            raise ValueError(f"k_min must be >= 0, got {k_min}")
        decisions: list[Decision] = []
        rows = {}
        for row in samples.to_pylist():
            reason = precondition(row)
            if reason is None:
                rows[row["sample_id"]] = row
            else:
                decisions.append(
                    Decision(row["sample_id"], STAGE, "oracle.precondition", "drop", detail={"reason": reason})
                )

        # (a) gold check -----------------------------------------------------------------
        settled_by: dict[str, tuple[str, str]] = {}  # sample_id -> (model, grade) that kept it
        gold_failed: dict[str, list[str]] = {}

        def settle_gold(model: str, answered_rows: list[dict[str, Any]], verdicts: list[str]) -> None:
            for row, verdict in zip(answered_rows, verdicts):
                sid = row["sample_id"]
                if verdict in (ERROR, JUDGE_ERROR):
                    gold_failed.setdefault(sid, []).append(model)
                elif keeps(verdict):
                    settled_by.setdefault(sid, (model, verdict))

        gold = GradedAnswers(judge, STAGE, "oracle.gold", decisions, settle_gold, self.recorded)
        model_major(
            pool,
            models,
            list(rows.values()),
            build=lambda row, spec: gold_request(row, spec, template),
            on_answers=gold.on_answers,
            eliminated=lambda row: row["sample_id"] in settled_by,
            stage="oracle.gold",
            replay=gold.replay,
        )

        final: dict[str, Decision] = {}
        for sid in rows:
            if sid in settled_by:
                continue
            if sid in gold_failed:
                final[sid] = Decision(
                    sid,
                    STAGE,
                    "oracle.verdict",
                    ERROR,
                    detail={
                        "step": "gold",
                        "rule": self.rule,
                        "failed_models": gold_failed[sid],
                        "reason": "no model kept the sample with gold and some failed; kept out pending a rerun",
                    },
                )
            else:
                final[sid] = Decision(
                    sid,
                    STAGE,
                    "oracle.verdict",
                    "drop",
                    detail={"step": "gold", "rule": self.rule, "reason": rule.gold_drop},
                )

        # (b) distractor check -----------------------------------------------------------
        passing = [sid for sid in rows if sid in settled_by]
        pairs: list[Pair] = [(sid, i) for sid in passing for i in range(len(rows[sid]["negative_contexts"]))]
        leaked_by: dict[Pair, str] = {}
        distractor_failed: dict[Pair, list[str]] = {}

        def negative_of(pair: Pair) -> dict[str, Any]:
            return rows[pair[0]]["negative_contexts"][pair[1]]

        def settle_distractors(model: str, answered_pairs: list[Pair], verdicts: list[str]) -> None:
            for pair, verdict in zip(answered_pairs, verdicts):
                if verdict == CORRECT:
                    leaked_by.setdefault(pair, model)
                elif verdict in (ERROR, JUDGE_ERROR):
                    distractor_failed.setdefault(pair, []).append(model)

        distractors = GradedAnswers(
            judge,
            STAGE,
            "oracle.distractor",
            decisions,
            settle_distractors,
            self.recorded,
            locate=lambda pair: (rows[pair[0]], negative_of(pair)["context_id"]),
        )
        model_major(
            pool,
            models,
            pairs,
            build=lambda pair, spec: distractor_request(rows[pair[0]], negative_of(pair), template),
            on_answers=distractors.on_answers,
            eliminated=lambda pair: pair in leaked_by,
            stage="oracle.distractor",
            replay=distractors.replay,
        )

        # (c) prune, k_min ---------------------------------------------------------------
        kept_rows: list[dict[str, Any]] = []
        for sid in passing:
            row = rows[sid]
            clean: list[dict[str, Any]] = []
            removed, errored = [], []
            for i, negative in enumerate(row["negative_contexts"]):
                pair, cid = (sid, i), negative["context_id"]
                if pair in leaked_by:
                    removed.append(cid)
                    decisions.append(
                        Decision(
                            sid,
                            STAGE,
                            "oracle.distractor",
                            "remove",
                            context_id=cid,
                            detail={
                                "deciding_model": leaked_by[pair],
                                "reason": "answered CORRECT with this distractor alone",
                            },
                        )
                    )
                elif pair in distractor_failed:
                    errored.append(cid)
                    decisions.append(
                        Decision(
                            sid,
                            STAGE,
                            "oracle.distractor",
                            ERROR,
                            context_id=cid,
                            detail={
                                "failed_models": distractor_failed[pair],
                                "reason": "not certified clean; removed pending a rerun",
                            },
                        )
                    )
                else:
                    clean.append(negative)
                    decisions.append(
                        Decision(sid, STAGE, "oracle.distractor", "keep", context_id=cid, detail={"models": models})
                    )
            enough = len(clean) >= k_min
            k_verdict = "pass" if enough else (ERROR if errored else "drop")
            decisions.append(
                Decision(
                    sid,
                    STAGE,
                    "oracle.k_min",
                    k_verdict,
                    detail={"negatives": len(clean), "k_min": k_min, "removed": removed, "errored": errored},
                )
            )
            if enough:
                row["negative_contexts"] = clean
                kept_rows.append(row)
                model, grade = settled_by[sid]
                final[sid] = Decision(
                    sid,
                    STAGE,
                    "oracle.verdict",
                    "keep",
                    detail={
                        "step": "k_min",
                        "rule": self.rule,
                        "gold_settled_by": model,
                        "gold_grade": grade,
                        "negatives": len(clean),
                    },
                )
            else:
                # the models whose answers removed distractors decided the drop (none: too few to begin with)
                removers = sorted(
                    {leaked_by[(sid, i)] for i in range(len(row["negative_contexts"])) if (sid, i) in leaked_by}
                )
                final[sid] = Decision(
                    sid,
                    STAGE,
                    "oracle.verdict",
                    k_verdict,
                    detail={
                        "step": "k_min",
                        "negatives": len(clean),
                        "k_min": k_min,
                        **({"deciding_model": ", ".join(removers)} if removers else {}),
                        "reason": f"{len(clean)} clean negatives < k_min {k_min}"
                        + (
                            f": {', '.join(removers)} answered correctly from {counted(len(removed), 'distractor')} "
                            "alone, removed"
                            if removers
                            else f" (the sample had {len(row['negative_contexts'])})"
                        )
                        + (f" ({len(errored)} unchecked after failures; pending a rerun)" if errored else ""),
                    },
                )

        decisions.extend(final[sid] for sid in rows)
        return EliminationResult(
            stage=STAGE,
            kept=rows_to_table(kept_rows, samples.schema),
            decisions=decisions,
            naive_calls=len(models) * (len(rows) + len(pairs)),
            requests=gold.requests + distractors.requests,
            run_id=run_id,
            components={"judge": judge.name, "stage_iii_prompt": template.id},
        )
