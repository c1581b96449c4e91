"""The plan of a RefLVQA run: the model calls of image necessity, fact-checkable sentences
and citations (image relevance embeds, it calls no chat model).

- Necessity: inspectors run model-major; a pair is eliminated once more than
  ``max_right_inspectors`` of them are graded right, so inspector ``i`` is asked about the
  pairs with at most that many rights so far (``reach``). A model evaluator grades every
  inspector answer; the lexical stand-in calls nothing.
- Fact-checkable sentences: one label request per sentence of each kept answer, split with
  the stage's own splitter (``core.text.split_sentences``), unless the labeller is the
  heuristic stand-in.
- Citations: per fact-checkable sentence, ``top_text`` documents for an ``llm:`` text
  entailment model and ``top_images`` images for the image entailment model (when a
  cross-modal encoder can retrieve them).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from mmcurate.annotation.reflvqa.citations import STAGE as CITATION
from mmcurate.annotation.reflvqa.factcheck import STAGE as FACTCHECK
from mmcurate.annotation.reflvqa.factcheck import sentence_request
from mmcurate.annotation.reflvqa.necessity import STAGE as NECESSITY
from mmcurate.annotation.reflvqa.necessity import grade_request, inspector_request
from mmcurate.benchmarks.reflvqa import RefLVQAConfig
from mmcurate.core.config import Settings
from mmcurate.core.specs import LLM, ModelRef
from mmcurate.core.text import split_sentences
from mmcurate.judging.entailment import DOC_CHARS, image_support_request, text_support_request

from ..inputs import PlanInput
from ..plan import Plan, PlanRow, plan_row, words
from ..rates import RefLVQARates, at
from ..tokens import CHARS_PER_TOKEN, TOKEN_NOTE

PAPER_ANSWER_WORDS = 76.5  # seed paper 004, Table 1
PAPER_SENTENCES = 5  # an answer of 76.5 words in sentences of about 15 words
PAPER_QUESTION_WORDS = 12


def reach(right: tuple[float, ...], inspectors: int, max_right: int) -> tuple[list[float], float]:
    """(share of pairs each inspector is asked about, share the necessity rule keeps) when
    inspector ``i`` is graded right with probability ``right[i]``."""
    alive = {0: 1.0}  # rights so far -> share of pairs still in play
    asked = []
    for i in range(inspectors):
        asked.append(sum(alive.values()))
        p = at(right, i)
        nxt: dict[int, float] = defaultdict(float)
        for rights, share in alive.items():
            nxt[rights] += share * (1 - p)
            if rights + 1 <= max_right:
                nxt[rights + 1] += share * p
        alive = nxt
    return asked, sum(alive.values())


def paper_rows() -> list[dict[str, Any]]:
    """Stand-in pairs shaped like the paper's (Table 1: answers of 76.5 words), for a plan
    with no ingest in the workdir."""
    sentence = words(PAPER_ANSWER_WORDS / PAPER_SENTENCES) + "."
    return [
        {
            "sample_id": f"paper-{n}",
            "source": "paper",
            "source_id": str(n),
            "question": words(PAPER_QUESTION_WORDS) + "?",
            "answers": [" ".join([sentence] * PAPER_SENTENCES)],
            "images": [f"{0:064x}"],
            "gold_contexts": [],
            "negative_contexts": [],
            "meta": "{}",
        }
        for n in range(4)
    ]


def plan_reflvqa(settings: Settings, given: PlanInput, rates: RefLVQARates) -> Plan:
    cfg = RefLVQAConfig.of(settings)
    rows = [r for r in given.rows if r["answers"]] or paper_rows()
    how = given.how if given.rows else given.how + "; no ingest in the workdir: requests shaped like the paper's pairs"
    relevance = rates.relevance if cfg.cross_modal_encoder is not None else 1.0
    relevant = given.samples * relevance
    inspectors = [settings.model(name) for name in cfg.inspectors]
    asked, kept_share = reach(rates.inspector_right, len(inspectors), cfg.max_right_inspectors)
    necessary = relevant * kept_share
    split = [[s for s in split_sentences(r["answers"][0]) if s.strip()] for r in rows]
    per_answer = rates.sentences if rates.sentences is not None else sum(len(s) for s in split) / len(split)
    sentences = necessary * per_answer
    checkable = sentences * rates.factcheckable
    statements = [(r, i, s) for r, parts in zip(rows, split) for i, s in enumerate(parts)] or [
        (rows[0], 0, rows[0]["answers"][0])
    ]

    def measured(step: str, model: str) -> float | None:
        return rates.completion.get(f"{step}/{model}")

    plan_rows: list[PlanRow] = []
    for spec, share in zip(inspectors, asked):
        plan_rows.append(
            plan_row(
                NECESSITY,
                NECESSITY,
                spec,
                relevant * share,
                [inspector_request(r) for r in rows],
                measured(NECESSITY, spec.name),
            )
        )
    if isinstance(cfg.evaluator, ModelRef):
        evaluator = settings.model(cfg.evaluator.name)
        answers = [
            grade_request(r, spec.name, r["answers"][0][: spec.max_tokens * CHARS_PER_TOKEN])
            for r in rows
            for spec in inspectors
        ]  # an inspector answer sized at its token budget
        plan_rows.append(
            plan_row(
                NECESSITY, NECESSITY, evaluator, relevant * sum(asked), answers, measured(NECESSITY, evaluator.name)
            )
        )
    if isinstance(cfg.factcheck_model, ModelRef):
        labeller = settings.model(cfg.factcheck_model.name)
        plan_rows.append(
            plan_row(
                FACTCHECK,
                FACTCHECK,
                labeller,
                sentences,
                [sentence_request(r, i, s) for r, i, s in statements],
                measured(FACTCHECK, labeller.name),
            )
        )
    if isinstance(cfg.text_entailment, LLM):
        judge = settings.model(cfg.text_entailment.model)
        premise = words(DOC_CHARS / 5)  # a retrieved document, at the length the judge's prompt cuts it to
        plan_rows.append(
            plan_row(
                CITATION,
                CITATION,
                judge,
                checkable * cfg.top_text,
                [text_support_request(f"{r['sample_id']}/s{i}", premise, s) for r, i, s in statements],
                measured(CITATION, judge.name),
            )
        )
    if cfg.image_entailment and cfg.cross_modal_encoder is not None:
        viewer = settings.model(cfg.image_entailment)
        plan_rows.append(
            plan_row(
                CITATION,
                CITATION,
                viewer,
                checkable * cfg.top_images,
                [image_support_request(f"{r['sample_id']}/s{i}", f"{0:064x}", s) for r, i, s in statements],
                measured(CITATION, viewer.name),
            )
        )
    notes = [
        f"sentences per answer: {per_answer:.1f}; fact-checkable share: {rates.factcheckable:.0%}",
        f"{TOKEN_NOTE}; completion = max_tokens unless a release measured it; label retries are not counted",
    ]
    if cfg.cross_modal_encoder is None:
        notes.append("image relevance is skipped (no cross-modal encoder): every candidate reaches the inspectors")
    return Plan.priced(
        settings,
        plan_rows,
        benchmark="reflvqa",
        samples=given.samples,
        samples_from=how,
        rates_from=rates.source,
        notes=notes,
        funnel=[
            ("candidates", given.samples),
            ("after relevance", relevant),
            ("after necessity", necessary),
            ("fact-checkable sentences", checkable),
        ],
    )
