"""The plan of a RefLVQA evaluation grid before it runs: the model's search queries per N,
each setting's answers (Two-step: its text answer, image answer, captions and combination;
Self-Refine: its feedback and refinement rounds, each counted; Captioning: its captions) and
the evaluators' grades, per step as the call counter names it
(``evaluate.reflvqa.<setting>.n<N>[.text|.image|.caption|.merge|.feedback|.refine]``), so the
flow can set the plan beside what it spent.
"""

from __future__ import annotations

from typing import Any

from mmcurate.benchmarks.reflvqa import RefLVQAEvalConfig
from mmcurate.core.config import Settings
from mmcurate.core.specs import ModelRef
from mmcurate.evaluation.reflvqa.answers import answer_request, caption_request, merge_request
from mmcurate.evaluation.reflvqa.graders import Unit, grade_request
from mmcurate.evaluation.reflvqa.grid import STAGE, completeness_statements
from mmcurate.evaluation.reflvqa.grounding import cot_request, feedback_request, refine_request
from mmcurate.evaluation.reflvqa.queries import queries_request
from mmcurate.evaluation.reflvqa.settings import (
    IMAGE_COT,
    IMAGE_GROUNDING,
    IMAGE_RAG,
    IMAGE_SELF_REFINE,
    TEXT_RAG,
    TWO_STEP,
    row_name,
)
from mmcurate.retrieval.rag import source_caption

from ..plan import Plan, PlanRow, plan_row, words
from .curation import PAPER_QUESTION_WORDS

PAPER_IMAGE_SHARE = 1.53 / 5  # MultiRAG's image documents among the 5 per query (004 Table 5, Claude-3.5-Sonnet)


def _documents(setting: str, n: int, k: int, has_text: bool, has_images: bool, shared: bool) -> tuple[float, float]:
    """(text, image) documents a question is expected to show in ``setting`` with N = ``n``:
    N x K per searched modality (duplicates across queries not removed: an upper bound);
    a fused list at the paper's image share when both modalities can be found."""
    found = n * k
    if setting == TEXT_RAG or not has_images:
        return (found if has_text and setting != IMAGE_RAG else 0.0), 0.0
    if setting == IMAGE_RAG or setting in IMAGE_GROUNDING or not has_text:
        return 0.0, float(found)
    if setting == TWO_STEP and not shared:
        return float(found), float(found)
    return found * (1 - PAPER_IMAGE_SHARE), found * PAPER_IMAGE_SHARE


def _stand_ins(text: float, image: float, doc_chars: int) -> list[dict[str, Any]]:
    docs = [
        {"context_id": f"t{i}", "modality": "text", "text": words(doc_chars / 5), "image": None, "title": "Title"}
        for i in range(round(text))
    ]
    return docs + [
        {"context_id": f"i{i}", "modality": "image", "text": None, "image": f"{0:064x}", "title": None}
        for i in range(round(image))
    ]


def _image_grounding(
    settings: Settings,
    model: Any,
    setting: str,
    label: str,
    step: str,
    row: dict[str, Any],
    questions: int,
    image: float,
) -> list[PlanRow]:
    """The calls of a section 6.2 setting by ``model`` (a model spec): CoT's answer; Self-Refine's answer and at most
    ``self_refine_rounds`` feedbacks and refinements (every round counted: an upper bound);
    Captioning's captions (with a captioning model) and answer."""
    cfg = RefLVQAEvalConfig.of(settings)
    docs = _stand_ins(0, image, cfg.doc_chars)
    reply = words(cfg.answer_max_tokens * 0.75)
    if setting == IMAGE_COT:
        return [plan_row(label, step, model, questions, [cot_request(row, docs, cfg.answer_max_tokens)])]
    if setting == IMAGE_SELF_REFINE:
        history = [*answer_request(row, docs, cfg.answer_max_tokens).messages, {"role": "assistant", "content": reply}]
        rounds = cfg.self_refine_rounds
        return [
            plan_row(label, step, model, questions, [answer_request(row, docs, cfg.answer_max_tokens)]),
            plan_row(
                label,
                f"{step}.feedback",
                model,
                questions * rounds,
                [feedback_request(row, history, 1, cfg.answer_max_tokens)],
            ),
            plan_row(
                label,
                f"{step}.refine",
                model,
                questions * rounds,
                [refine_request(row, [*history, {"role": "user", "content": reply}], 1, cfg.answer_max_tokens)],
            ),
        ]
    out = []
    if cfg.captioner and image:
        out.append(
            plan_row(
                label,
                f"{step}.caption",
                settings.model(cfg.captioner),
                questions * image,
                [caption_request(row, "i0", f"{0:064x}", cfg.caption_max_tokens)],
            )
        )
    out.append(
        plan_row(
            label,
            step,
            model,
            questions,
            [
                answer_request(
                    row, [{**d, "caption": words(cfg.caption_max_tokens * 0.75)} for d in docs], cfg.answer_max_tokens
                )
            ],
        )
    )
    return out


def plan_reflvqa_evaluation(
    settings: Settings, model: str, qa: list[dict[str, Any]], documents: Any, grid: list[str], queries: list[int]
) -> Plan:
    """The calls of a RefLVQA evaluation grid (``evaluation.reflvqa``; ``documents``: the
    release's knowledge base) before it runs: the model's search queries per N, each setting's
    answers (Two-step: text answer, image answer, captions, combination) and the evaluators'
    grades, as if every call were answered."""
    cfg = RefLVQAEvalConfig.of(settings)
    spec, rows = (
        settings.model(model),
        qa
        or [
            {"sample_id": "q", "question": words(PAPER_QUESTION_WORDS) + "?", "images": [f"{0:064x}"], "sentences": []}
        ],
    )
    kb = documents.select(["modality", "title", "text"]).to_pylist()
    has_text = any(d["modality"] == "text" for d in kb)
    has_images = any(
        d["modality"] == "image" and (cfg.cross_modal_encoder is not None or source_caption(d)) for d in kb
    )
    questions = len(qa)
    row = rows[0]
    plan_rows: list[PlanRow] = []
    answers = 0.0
    for n in queries:
        plan_rows.append(
            plan_row(
                "queries",
                f"{STAGE}.queries.n{n}",
                spec,
                questions,
                [queries_request(r, n, cfg.query_max_tokens) for r in rows],
            )
        )
        for setting in grid:
            text, image = _documents(setting, n, cfg.top_k, has_text, has_images, cfg.two_step_documents == "shared")
            step, label = f"{STAGE}.{setting}.n{n}", row_name(setting, n)
            answers += questions
            if setting in IMAGE_GROUNDING:
                plan_rows += _image_grounding(settings, spec, setting, label, step, row, questions, image)
                continue
            if setting != TWO_STEP:
                plan_rows.append(
                    plan_row(
                        label,
                        step,
                        spec,
                        questions,
                        [answer_request(row, _stand_ins(text, image, cfg.doc_chars), cfg.answer_max_tokens)],
                    )
                )
                continue
            plan_rows.append(
                plan_row(
                    label,
                    f"{step}.text",
                    spec,
                    questions,
                    [answer_request(row, _stand_ins(text, 0, cfg.doc_chars), cfg.answer_max_tokens)],
                )
            )
            if image:
                shown = _stand_ins(0, image, cfg.doc_chars)
                if cfg.captioner:
                    plan_rows.append(
                        plan_row(
                            label,
                            f"{step}.caption",
                            settings.model(cfg.captioner),
                            questions * image,
                            [caption_request(row, "i0", f"{0:064x}", cfg.caption_max_tokens)],
                        )
                    )
                plan_rows.append(
                    plan_row(
                        label,
                        f"{step}.image",
                        spec,
                        questions,
                        [
                            answer_request(
                                row,
                                [{**d, "caption": words(cfg.caption_max_tokens * 0.75)} for d in shown],
                                cfg.answer_max_tokens,
                            )
                        ],
                    )
                )
            if image and text:
                reply = words(cfg.answer_max_tokens * 0.75)
                plan_rows.append(
                    plan_row(
                        label,
                        f"{step}.merge",
                        spec,
                        questions,
                        [merge_request(row, reply, reply, cfg.answer_max_tokens)],
                    )
                )
    sentences = sum(len(r["sentences"]) for r in qa) / questions if questions else 0.0
    statements = sum(len(completeness_statements(r)) for r in qa) / questions if questions else 0.0
    response = words(cfg.answer_max_tokens * 0.75)
    doc = _stand_ins(1, 0, cfg.doc_chars)
    units = {
        "groundedness": (answers * sentences, Unit("g", "groundedness", words(15), documents=tuple(doc))),
        "completeness": (answers * statements, Unit("c", "completeness", words(15), response=response)),
        "relevance": (answers, Unit("r", "relevance", row["question"], response=response)),
    }
    for metric, (count, unit) in units.items():
        grader = getattr(cfg.evaluators, metric)
        if isinstance(grader, ModelRef) and count:
            plan_rows.append(
                plan_row("grading", f"{STAGE}.{metric}", settings.model(grader.name), count, [grade_request(unit)])
            )
    notes = [
        f"documents per question: N x K = N x {cfg.top_k} per searched modality"
        + (
            " (duplicates: keep, as retrieved)"
            if cfg.duplicates == "keep"
            else ", duplicates counted (an upper bound: duplicates: merge)"
        )
        + f"; MultiRAG and shared Two-step at the paper's image share ({PAPER_IMAGE_SHARE:.0%}, Table 5)",
        "every call is counted as answered once (no retries); evaluator requests at the dataset answers' "
        f"sentence count ({sentences:.1f} per answer) for groundedness, {statements:.1f} graded dataset "
        "sentences per answer for completeness; lexical evaluators call no model",
    ]
    if not has_images:
        notes.append(
            "no image document can be found (no cross-modal encoder, no source caption): ImageRAG shows "
            "none and Two-step asks only its text answer"
        )
    return Plan.priced(
        settings,
        plan_rows,
        benchmark="reflvqa-evaluation",
        samples=questions,
        samples_from="QA pairs of the release",
        rates_from="every question answered in every setting",
        funnel=[("questions", questions), ("answers", answers)],
        notes=notes,
    )
