"""The plan of a ReflectV run (MIRROR, seed paper 002, section 4): the model calls of each
step, sized with the stages' own request builders.

- Dialogue: a sample without a ready-made dialogue (FIRE's are ingested) asks the student,
  then the teacher, once per turn until the teacher gives 10 or ``max_turns`` answers were
  given; the plan takes ``rates.turns`` turns per dialogue (``max_turns``, an upper bound,
  unless a release measured them).
- Trajectory filter: an LLM judge (``judge.kind: llm``) grades the final answer of the
  dialogues that pass the score rules; the plan counts one request per dialogue (an upper
  bound). The lexical judge calls nothing.
- Reflection, per reflective turn (every turn but the last) of a dialogue the filter keeps:
  the keyword model twice for General QA (the feedback's entities, then one caption) and
  once for the other domains (a subject phrase), unless the rule-based stand-in picks them;
  the rewriter once.
- Grounding: a pointing model (``pointing:<model>``) once per reflective turn; boxes and
  saliency call nothing.
- Visual check: the verifier once per reflective turn of a chain (an upper bound: a chain
  that failed an earlier step is not asked).

Retention comes from ``rates`` (``planning.rates``: the paper's funnel, or a release's).
Parse retries are not counted.
"""

from __future__ import annotations

import json
from typing import Any

from mmcurate.annotation.grounders import Query, point_request
from mmcurate.annotation.reflectv.dialogue import STAGE as DIALOGUE
from mmcurate.annotation.reflectv.dialogue import STUDENT_TEMPLATE, TEACHER_TEMPLATE, student_messages, teacher_messages
from mmcurate.annotation.reflectv.reflection import STAGE as REFLECTION
from mmcurate.annotation.reflectv.reflection import caption_request, objects_request, rewrite_request, subject_request
from mmcurate.annotation.reflectv.trajectory import STAGE as TRAJECTORY
from mmcurate.annotation.reflectv.visual import STAGE as VISUAL
from mmcurate.annotation.reflectv.visual import verify_request
from mmcurate.benchmarks.reflectv import ReflectVConfig
from mmcurate.core.config import Settings
from mmcurate.core.domains import GENERAL_QA
from mmcurate.core.specs import ModelRef, Pointing
from mmcurate.judging.simpleqa import JudgeItem, judge_request
from mmcurate.models.requests import ChatRequest

from ..inputs import PlanInput
from ..plan import Plan, PlanRow, plan_row, words
from ..rates import ReflectVRates
from ..tokens import TOKEN_NOTE

GROUNDING = "grounding"
STAND_IN_IMAGE = f"{0:064x}"
QUESTION_WORDS, ANSWER_WORDS, FEEDBACK_WORDS, THINK_WORDS = 10, 12, 25, 35  # stand-in text lengths


def paper_rows() -> list[dict[str, Any]]:
    """Stand-in samples for a plan with no ingest in the workdir: a 10-word question about one
    image, a short ground truth, General QA (the paper does not give text lengths)."""
    return [
        {
            "sample_id": f"paper-{n}",
            "question": words(QUESTION_WORDS) + "?",
            "answers": ["a short answer"],
            "images": [STAND_IN_IMAGE],
            "meta": json.dumps({"domain": GENERAL_QA}),
        }
        for n in range(4)
    ]


def _meta(row: dict[str, Any]) -> dict[str, Any]:
    meta = json.loads(row.get("meta") or "{}")
    return meta if isinstance(meta, dict) else {}


def _turns(count: int) -> list[dict[str, Any]]:
    """Stand-in turns of a dialogue: an answer, the teacher's feedback, and what the later
    steps add to a reflective turn (a keyword, a reflection, a marked image)."""
    return [
        {
            "answer": words(ANSWER_WORDS),
            "score": 5,
            "feedback": words(FEEDBACK_WORDS),
            "keyword": "the object",
            "think": words(THINK_WORDS),
            "color": "red",
            "mark_type": "point",
            "marks": 1,
            "marked_image": STAND_IN_IMAGE,
        }
        for _ in range(count)
    ]


def plan_reflectv(settings: Settings, given: PlanInput, rates: ReflectVRates) -> Plan:
    cfg = ReflectVConfig.of(settings)
    rows = [r for r in given.rows if r["answers"] and r["images"]] or paper_rows()
    how = given.how if given.rows else given.how + "; no ingest in the workdir: requests shaped like stand-in samples"
    depth = rates.turns if rates.turns is not None else float(cfg.max_turns)
    turns = max(1, round(depth))
    ingested = sum(1 for r in rows if "dialogue" in _meta(r)) / len(rows) if given.rows else 0.0
    general = sum(1 for r in rows if _meta(r).get("domain") == GENERAL_QA) / len(rows)
    built = given.samples * (1 - ingested) if cfg.student and cfg.teacher else 0.0
    kept = given.samples * rates.trajectory
    reflective = kept * max(0.0, depth - 1)
    chains = kept * rates.visual
    history = _turns(turns)

    def example(build) -> list[ChatRequest]:
        return [build(r, n) for r in rows for n in range(turns)]

    plan_rows: list[PlanRow] = []
    if built and cfg.student and cfg.teacher:  # built only with both (above)
        student, teacher = settings.model(cfg.student), settings.model(cfg.teacher)
        plan_rows.append(
            plan_row(
                DIALOGUE,
                DIALOGUE,
                student,
                built * depth,
                example(
                    lambda r, n: ChatRequest(
                        f"{r['sample_id']}/s{n + 1}",
                        student_messages(r["question"], r["images"][0], history[:n]),
                        STUDENT_TEMPLATE,
                    )
                ),
            )
        )
        plan_rows.append(
            plan_row(
                DIALOGUE,
                DIALOGUE,
                teacher,
                built * depth,
                example(
                    lambda r, n: ChatRequest(
                        f"{r['sample_id']}/t{n + 1}",
                        teacher_messages(
                            r["question"], r["answers"], r["images"][0], history[:n], history[n]["answer"]
                        ),
                        TEACHER_TEMPLATE,
                    )
                ),
            )
        )
    judge = settings.model(settings.judge.model) if settings.judge.kind == "llm" and settings.judge.model else None
    if judge is not None:
        plan_rows.append(
            plan_row(
                TRAJECTORY,
                TRAJECTORY,
                judge,
                given.samples,
                [
                    judge_request(JudgeItem(r["sample_id"], r["question"], list(r["answers"]), history[-1]["answer"]))
                    for r in rows
                ],
            )
        )
    turn = history[0]
    if isinstance(cfg.keywords, ModelRef):
        keywords = settings.model(cfg.keywords.name)
        examples = []
        if general:  # General QA: the feedback's entities, then one caption of them
            examples += [objects_request(r["sample_id"], r["question"], turn["answer"], turn["feedback"]) for r in rows]
            examples += [caption_request(r["sample_id"], ["the object", "the table"]) for r in rows]
        if general < 1:
            examples += [subject_request(r["sample_id"], r["question"], r["answers"]) for r in rows]
        plan_rows.append(
            plan_row(REFLECTION, REFLECTION, keywords, reflective * (2 * general + (1 - general)), examples)
        )
    rewriter = settings.model(cfg.rewriter)
    rewrites_in = GROUNDING if cfg.caption_order == "before_rewrite" else REFLECTION  # after the caption (Figure 11)
    plan_rows.append(
        plan_row(
            rewrites_in,
            rewrites_in,
            rewriter,
            reflective,
            [rewrite_request(r["sample_id"], turn["feedback"]) for r in rows],
        )
    )
    if isinstance(cfg.grounding, Pointing):
        pointer = settings.model(cfg.grounding.model)
        plan_rows.append(
            plan_row(
                GROUNDING,
                GROUNDING,
                pointer,
                reflective,
                [point_request(Query(r["sample_id"], r["images"][0], turn["keyword"])) for r in rows],
            )
        )
    verifier = settings.model(cfg.verifier)
    plan_rows.append(
        plan_row(
            VISUAL, VISUAL, verifier, reflective, [verify_request(r["sample_id"], r["question"], turn) for r in rows]
        )
    )
    # collapse (the paper's): every sample after the filter is released; collapse_or_drop: chains at rho
    released = chains / cfg.rho if cfg.rho and cfg.rho_rule == "collapse_or_drop" else kept
    notes = [
        f"turns per built dialogue: {depth:.1f} ({'measured' if rates.turns is not None else 'max_turns, an upper bound'}); "
        f"dialogues ingested ready-made (FIRE): {ingested:.0%}; General QA share of reflective turns: {general:.0%}",
        (
            f"released: the verified chains with QA pairs up to the share rho = {cfg.rho} (rho_rule collapse_or_drop)"
            if cfg.rho_rule == "collapse_or_drop"
            else f"released: every dialogue after the filter, surplus chains collapsed to QA pairs at rho = {cfg.rho}"
        ),
        f"{TOKEN_NOTE}; completion = max_tokens; retries of unreadable replies are not counted",
    ]
    if not cfg.student:
        notes.append("no student and teacher: every dialogue must be ingested ready-made (FIRE)")
    return Plan.priced(
        settings,
        plan_rows,
        benchmark="reflectv",
        samples=given.samples,
        samples_from=how,
        rates_from=rates.source,
        notes=notes,
        funnel=[
            ("candidates", given.samples),
            ("after the trajectory filter", kept),
            ("verified chains", chains),
            ("released", released),
        ],
    )
