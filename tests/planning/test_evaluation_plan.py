"""The plan of a RefLVQA evaluation grid: the search-query calls, each setting's answers and
Two-step's extra calls (captions, image answer, combination) counted before the run, under
the names the call counter gives them; set beside a scripted run of the same grid."""

from __future__ import annotations

import pyarrow as pa
import pytest

from mmcurate.core.config import Settings
from mmcurate.evaluation.reflvqa.graders import METRICS, make_grader
from mmcurate.evaluation.reflvqa.grid import evaluate_reflvqa
from mmcurate.planning.reflvqa.evaluation import PAPER_IMAGE_SHARE, plan_reflvqa_evaluation
from mmcurate.releases.reflvqa.tables import KNOWLEDGE_BASE
from mmcurate.retrieval.rag import BOTH, Hit


def sentence(i, checkable=True, cites=("t1",)):
    return {
        "index": i,
        "text": f"Sentence {i}.",
        "fact_checkable": checkable,
        "text_citations": list(cites),
        "image_citations": [],
        "flagged": False,
    }


QA = [
    {
        "sample_id": f"q{i}",
        "question": f"Q-{i} what is it?",
        "images": [],
        "answer": "...",
        "sentences": [sentence(0), sentence(1), sentence(2, checkable=False)],
    }
    for i in range(2)
]
DOCS = [
    {"doc_id": "t1", "modality": "text", "text": "A lamp.", "image": None, "title": "Lamp"},
    {"doc_id": "image:ab", "modality": "image", "text": None, "image": "ab" * 32, "title": "A lamp at night"},
]


class BothModalities:
    """Every query finds one text and one image document."""

    def rank(self, queries, searched=BOTH, images=()):
        return [
            [h for h in (Hit("t1", "text", 1.0), Hit("image:ab", "image", 0.5)) if h.modality in searched]
            for _ in queries
        ]

    def first_stage(self, queries, searched=BOTH, images=(), k=None):
        return self.rank(queries, searched)

    def score_scale(self, searched=BOTH):
        return None


def grid_settings(world, tmp_path):
    world.add(
        "vlm",
        [
            {"when_all": ["Search queries:"], "answer": "a\nb\nc\nd"},
            {"when_all": ["Search query:"], "answer": "a"},
            # N = 4 shows its 4 x 1 text documents as [1]-[4], then the image ones from [5]
            {"when_all": ["Combined answer:", "image documents: Fine [5]."], "answer": "Both [1, 5]."},
            {"when_all": ["Combined answer:"], "answer": "Both [1, 2]."},
        ],
        default="Fine [1].",
    )
    world.add("cap", [], default="A lamp.")
    world.add("judge", [], default="3")
    world.specs["cap"] = world.specs["cap"].model_copy(update={"vision": True})
    return Settings(
        workdir=tmp_path,
        models=world.specs,
        evaluation={
            "reflvqa": {
                "top_k": 5,
                "captioner": "cap",
                "evaluators": {"groundedness": "lexical", "completeness": "judge", "relevance": "judge"},
            }
        },
    )


def test_the_plan_counts_queries_answers_and_two_steps_extra_calls(world, tmp_path):
    settings = grid_settings(world, tmp_path)
    plan = plan_reflvqa_evaluation(
        settings, "vlm", QA, pa.Table.from_pylist(DOCS, schema=KNOWLEDGE_BASE), ["text", "two-step"], [1, 4]
    )
    requests = {(r.step, r.model): r.requests for r in plan.rows}
    share = PAPER_IMAGE_SHARE
    assert requests == pytest.approx(
        {
            ("evaluate.reflvqa.queries.n1", "vlm"): 2,
            ("evaluate.reflvqa.queries.n4", "vlm"): 2,
            ("evaluate.reflvqa.text.n1", "vlm"): 2,
            ("evaluate.reflvqa.text.n4", "vlm"): 2,
            ("evaluate.reflvqa.two-step.n1.text", "vlm"): 2,
            ("evaluate.reflvqa.two-step.n4.text", "vlm"): 2,
            ("evaluate.reflvqa.two-step.n1.image", "vlm"): 2,
            ("evaluate.reflvqa.two-step.n4.image", "vlm"): 2,
            ("evaluate.reflvqa.two-step.n1.merge", "vlm"): 2,
            ("evaluate.reflvqa.two-step.n4.merge", "vlm"): 2,
            ("evaluate.reflvqa.two-step.n1.caption", "cap"): 2 * 5 * share,  # N x K documents at the paper's share
            ("evaluate.reflvqa.two-step.n4.caption", "cap"): 2 * 20 * share,
            ("evaluate.reflvqa.completeness", "judge"): 8 * 2,  # 8 answers x 2 graded dataset sentences
            ("evaluate.reflvqa.relevance", "judge"): 8,  # lexical groundedness calls nothing
        }
    )
    four = next(r for r in plan.rows if r.step == "evaluate.reflvqa.text.n4")
    one = next(r for r in plan.rows if r.step == "evaluate.reflvqa.text.n1")
    assert four.prompt_tokens > 3 * one.prompt_tokens  # 20 documents shown instead of 5
    assert plan.funnel == [("questions", 2), ("answers", 8)]
    # without an image document anyone can find, Two-step asks its text step only
    text_only = plan_reflvqa_evaluation(
        settings, "vlm", QA, pa.Table.from_pylist(DOCS[:1], schema=KNOWLEDGE_BASE), ["two-step"], [1]
    )
    assert [r.step for r in text_only.rows if r.model == "vlm"] == [
        "evaluate.reflvqa.queries.n1",
        "evaluate.reflvqa.two-step.n1.text",
    ]


def test_the_plan_matches_what_a_scripted_run_asks(world, tmp_path):
    settings = grid_settings(world, tmp_path)
    cfg = settings.evaluation.reflvqa
    plan = plan_reflvqa_evaluation(
        settings, "vlm", QA, pa.Table.from_pylist(DOCS, schema=KNOWLEDGE_BASE), ["text", "two-step"], [1, 4]
    )
    graders = {m: make_grader(getattr(cfg.evaluators, m), m, world.pool) for m in METRICS}
    run = evaluate_reflvqa(
        QA,
        {d["doc_id"]: d for d in DOCS},
        BothModalities(),
        world.pool,
        "vlm",
        graders,
        cfg,
        ["text", "two-step"],
        [1, 4],
    )
    assert run.counts["answered"] == 8
    rows = {(r["step"], r["model"]): r for r in plan.against(world.counter.rows())}
    exact = [key for key in rows if key[1] == "vlm"]
    assert len(exact) == 10
    assert {key: rows[key]["requests"] for key in exact} == {key: rows[key]["planned_requests"] for key in exact}
    # one image document per question here, not the paper's 1.53; the grade batches ask equal units once
    assert rows[("evaluate.reflvqa.two-step.n1.caption", "cap")]["requests"] == 2
    assert 0 < rows[("evaluate.reflvqa.relevance", "judge")]["requests"] <= 8


def test_the_plan_counts_table_7s_settings(world, tmp_path):
    """Section 6.2's settings: CoT one answer; Self-Refine its answer and, at most, a feedback
    and a refinement per round (3); Captioning the captions of its N x K image documents."""
    settings = grid_settings(world, tmp_path)
    plan = plan_reflvqa_evaluation(
        settings,
        "vlm",
        QA,
        pa.Table.from_pylist(DOCS, schema=KNOWLEDGE_BASE),
        ["image-cot", "image-self-refine", "image-caption"],
        [1],
    )
    assert {
        (r.step, r.model): r.requests
        for r in plan.rows
        if "reflvqa.relevance" not in r.step and "completeness" not in r.step
    } == {
        ("evaluate.reflvqa.queries.n1", "vlm"): 2,
        ("evaluate.reflvqa.image-cot.n1", "vlm"): 2,
        ("evaluate.reflvqa.image-self-refine.n1", "vlm"): 2,
        ("evaluate.reflvqa.image-self-refine.n1.feedback", "vlm"): 2 * 3,
        ("evaluate.reflvqa.image-self-refine.n1.refine", "vlm"): 2 * 3,
        ("evaluate.reflvqa.image-caption.n1.caption", "cap"): 2 * 5,
        ("evaluate.reflvqa.image-caption.n1", "vlm"): 2,
    }
