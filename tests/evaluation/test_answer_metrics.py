"""RefLVQA arithmetic pinned on hand-computed tables: citations, answer metrics, retrieval metrics."""

from __future__ import annotations

import math
import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmcurate.evaluation.reflvqa.answer_metrics import answer_metrics_markdown, compute_answer_metrics
from mmcurate.evaluation.reflvqa.cited_answers import CitedSentence, parse_cited_answer
from mmcurate.evaluation.reflvqa.graders import LexicalGrader, Unit
from mmcurate.evaluation.reflvqa.grid import ANSWERS, GRADES
from mmcurate.evaluation.retrieval_metrics import first_hit, hit_at_k, ndcg_at_k, plot_hit_at_k, recall_at_k


def test_citations_are_read_per_sentence():
    got = parse_cited_answer("Paris is the capital [1]. It has 2 million people [2, 3]. Nice city.", 3)
    assert got == [
        CitedSentence("Paris is the capital.", (1,)),
        CitedSentence("It has 2 million people.", (2, 3)),
        CitedSentence("Nice city.", ()),
    ]
    # a citation that opens the next split piece ends the sentence before it; adjacent brackets add up
    assert parse_cited_answer("Paris is large. [1] It is old.[2][3]", 3) == [
        CitedSentence("Paris is large.", (1,)),
        CitedSentence("It is old.", (2, 3)),
    ]
    assert parse_cited_answer("A robin [sic] sings [2].", 2) == [CitedSentence("A robin [sic] sings.", (2,))]
    assert parse_cited_answer("No documents help here.", 5) == [CitedSentence("No documents help here.", ())]


@pytest.mark.parametrize("reply", ["Paris [1-3].", "Paris [doc 1].", "", "   ", "[1]"])
def test_unreadable_citations_are_none(reply):
    assert parse_cited_answer(reply, 5) is None


def test_a_citation_of_no_shown_document_is_read_apart_not_unreadable():
    """004 section 4.2: "Not supported means there is no evidence or no cited documents": an
    answer citing [6] of five documents is read and scored, its bad number kept apart."""
    assert parse_cited_answer("Paris is big [6]. It is old [2, 7]. Nice [0].", 5) == [
        CitedSentence("Paris is big.", (), (6,)),
        CitedSentence("It is old.", (2,), (7,)),
        CitedSentence("Nice.", (), (0,)),
    ]
    assert parse_cited_answer("Paris is large. [9] It is old.", 5) == [
        CitedSentence("Paris is large.", (), (9,)),
        CitedSentence("It is old.", ()),
    ]


def test_lexical_grader_levels():
    g = LexicalGrader("groundedness")
    docs = ({"context_id": "d", "modality": "text", "title": "Tower", "text": "The tower is 300 metres tall."},)
    units = [
        Unit("a", "groundedness", "The tower is 300 metres tall.", documents=docs),  # 4/4 content words
        Unit("b", "groundedness", "The tower is 300 metres tall and red and old.", documents=docs),  # 4/6
        Unit("c", "groundedness", "The tower is red, old, blue and famous.", documents=docs),  # 1/5
        Unit(
            "d",
            "groundedness",
            "The tower is 300 metres tall.",
            documents=({"context_id": "i", "modality": "image", "title": None, "text": None},),
        ),
    ]
    assert [r.value for r in g.grade(units)] == [1.0, 1.0, 0.0, 0.0]
    assert [r.value for r in LexicalGrader("groundedness", 0.9).grade(units[:2])] == [1.0, 0.5]
    rel = LexicalGrader("relevance").grade(
        [
            Unit("r", "relevance", "How tall is the tower?", response="It is tall."),
            Unit("s", "relevance", "How tall is the tower?", response="No idea."),
        ]
    )
    assert [r.value for r in rel] == [4.0, 1.0]  # 1 + 6 x 1/2 (tall, not tower); 1 + 0
    assert all(r.by == "lexical-grader-v1" for r in rel)


def _answer(sid, retrieved, sentences, status="answered", model="m", setting="text", n=1):
    return {
        "sample_id": sid,
        "model": model,
        "setting": setting,
        "n_queries": n,
        "top_k": 5,
        "queries": ["q"] * n,
        "retrieved": [{"doc_id": d, "modality": m, "score": 1.0} for d, m in retrieved],
        "answer": "x",
        "steps": [],
        "sentences": [{"index": i, "text": f"s{i}", "citations": c} for i, c in enumerate(sentences)],
        "status": status,
        "error": None,
        "run_id": "r",
    }


def _grade(sid, metric, unit, grade, model="m", setting="text", n=1):
    return {
        "sample_id": sid,
        "model": model,
        "setting": setting,
        "n_queries": n,
        "metric": metric,
        "unit": unit,
        "statement": "x",
        "documents": [],
        "grade": grade,
        "evaluator": "scripted",
        "raw": None,
        "error": None,
        "run_id": "r",
    }


def test_the_issues_example_one_answer():
    answers = pa.Table.from_pylist(
        [_answer("a", [("t1", "text"), ("i1", "image")], [["t1"], ["i1"], []])], schema=ANSWERS
    )
    grades = pa.Table.from_pylist(
        [_grade("a", "groundedness", i, g) for i, g in enumerate([1.0, 0.5, 0.0])] + [_grade("a", "relevance", 0, 6.0)],
        schema=GRADES,
    )
    [m] = compute_answer_metrics(answers, grades).to_pylist()
    assert m["groundedness_mean"] == pytest.approx(0.5)
    assert m["groundedness_at_1"] == pytest.approx(1 / 3) and m["groundedness_at_05"] == pytest.approx(2 / 3)
    assert m["relevance_mean"] == 6.0 and m["completeness_mean"] is None and m["no_statements"] == 1
    assert (m["retrieved_text"], m["retrieved_image"], m["used_text"], m["used_image"]) == (1.0, 1.0, 1.0, 1.0)


def test_per_answer_then_the_mean_over_answers_unless_pooled():
    """004 section 4.2: "the final groundedness score for each A is calculated as the averaged
    g(a_i, D) over all sentences in A"; the row is the mean over answers. A long answer of four
    sentences (1, 0, 0, 0) and a short one of one (1): per answer (0.25 + 1) / 2 = 0.625, pooled
    2 / 5 = 0.4."""
    answers = pa.Table.from_pylist(
        [_answer("long", [("t1", "text")], [["t1"]] * 4), _answer("short", [("t1", "text")], [["t1"]])], schema=ANSWERS
    )
    grades = pa.Table.from_pylist(
        [_grade("long", "groundedness", i, g) for i, g in enumerate([1.0, 0.0, 0.0, 0.0])]
        + [_grade("short", "groundedness", 0, 1.0)]
        + [_grade("long", "completeness", i, g) for i, g in enumerate([0.5, 0.5, 0.0])]  # 1/3: @0.5 2/3, @1 0
        + [_grade("short", "completeness", 0, 1.0)],
        schema=GRADES,
    )
    [m] = compute_answer_metrics(answers, grades).to_pylist()
    assert m["groundedness_mean"] == pytest.approx(0.625)
    assert m["groundedness_at_1"] == pytest.approx((1 / 4 + 1) / 2) and m["groundedness_at_05"] == pytest.approx(0.625)
    assert m["completeness_mean"] == pytest.approx((1 / 3 + 1) / 2)
    assert m["completeness_at_1"] == pytest.approx(0.5) and m["completeness_at_05"] == pytest.approx((2 / 3 + 1) / 2)
    [p] = compute_answer_metrics(answers, grades, "pooled").to_pylist()
    assert p["groundedness_mean"] == pytest.approx(2 / 5) and p["groundedness_at_1"] == pytest.approx(2 / 5)
    assert p["completeness_mean"] == pytest.approx(2 / 4) and p["completeness_at_05"] == pytest.approx(3 / 4)
    for row in (m, p):
        for metric in ("groundedness", "completeness"):
            assert row[f"{metric}_mean"] == pytest.approx(
                row[f"{metric}_at_1"] + 0.5 * (row[f"{metric}_at_05"] - row[f"{metric}_at_1"])
            )
    with pytest.raises(ValueError, match="unknown score average 'mean'"):
        compute_answer_metrics(answers, grades, "mean")


def test_mean_and_at_thresholds_pool_the_sentences():
    answers = pa.Table.from_pylist(
        [
            _answer("a", [("t1", "text"), ("t2", "text")], [["t1"], ["t1", "t2"], ["t2"], ["t2"]]),
            _answer("b", [("t1", "text"), ("i1", "image")], [["i1"]]),
            _answer("c", [("t1", "text")], [], status="unreadable"),
            _answer("d", [("t1", "text")], [["t1"]]),
        ],
        schema=ANSWERS,
    )
    grades = pa.Table.from_pylist(
        [_grade("a", "groundedness", i, g) for i, g in enumerate([1.0, 1.0, 0.0, 0.0])]  # answer a: 0.5
        + [_grade("b", "groundedness", 0, 1.0)]  # answer b: 1.0
        + [_grade("d", "groundedness", 0, None)]  # an evaluator error: d leaves groundedness only
        + [
            _grade("a", "completeness", 0, 0.5),
            _grade("a", "completeness", 1, 1.0),  # a: 0.75
            _grade("b", "completeness", 0, 0.0),
            _grade("d", "completeness", 0, 1.0),
        ]  # b: 0, d: 1
        + [_grade(s, "relevance", 0, r) for s, r in (("a", 7.0), ("b", 4.0), ("d", 1.0))],
        schema=GRADES,
    )
    [m] = compute_answer_metrics(answers, grades, "pooled").to_pylist()
    assert (m["answers"], m["answered"], m["failed"], m["groundedness_errors"]) == (4, 3, 1, 1)
    assert m["groundedness_mean"] == pytest.approx(3 / 5)  # pooled 1, 1, 0, 0, 1 (per answer: (0.5 + 1) / 2)
    assert m["groundedness_at_1"] == pytest.approx(3 / 5)  # pooled sentences 1, 1, 0, 0, 1
    assert m["groundedness_at_05"] == pytest.approx(3 / 5)
    assert m["completeness_mean"] == pytest.approx((0.5 + 1.0 + 0.0 + 1.0) / 4)  # not (0.75 + 0 + 1) / 3
    assert m["completeness_at_1"] == pytest.approx(2 / 4) and m["completeness_at_05"] == pytest.approx(3 / 4)
    assert m["relevance_mean"] == pytest.approx(4.0)
    assert m["retrieved_text"] == pytest.approx((2 + 1 + 1 + 1) / 4) and m["retrieved_image"] == pytest.approx(1 / 4)
    assert m["used_text"] == pytest.approx((2 + 0 + 1) / 3) and m["used_image"] == pytest.approx(1 / 3)
    md = answer_metrics_markdown(compute_answer_metrics(answers, grades, "pooled")).splitlines()
    assert md[0].startswith("| Model | Grd Mean | Grd @1.0 | Grd @0.5 | Com Mean | Com @1.0 | Com @0.5 | Rel (1-7) |")
    assert md[2].startswith("| m + TextRAG | 0.600 | 0.600 | 0.600 | 0.625 | 0.500 | 0.750 | 4.000 | 1.25 | 0.25 |")


@pytest.mark.parametrize("average", ["per_answer", "pooled"])
@pytest.mark.parametrize("seed", range(5))
def test_mean_is_the_papers_identity_of_the_at_columns(seed, average):
    """Table 5 (004): Mean = @1.0 + 0.5 x (@0.5 - @1.0) in its cells (InternVL2.5 + ImageRAG:
    0.213 + 0.5 x 0.318 = 0.372); with grades 1 / 0.5 / 0 both readings give it."""
    assert 0.213 + 0.5 * (0.531 - 0.213) == pytest.approx(0.372, abs=1e-3)
    rng = random.Random(seed)
    answers, grades = [], []
    for a in range(6):  # answers of different lengths: a per-answer mean would weigh them differently
        sid, count = f"a{a}", rng.randint(1, 6)
        answers.append(_answer(sid, [("t1", "text")], [["t1"]] * count))
        grades += [
            _grade(sid, metric, i, rng.choice([0.0, 0.5, 1.0]))
            for metric in ("groundedness", "completeness")
            for i in range(count)
        ]
    [m] = compute_answer_metrics(
        pa.Table.from_pylist(answers, schema=ANSWERS), pa.Table.from_pylist(grades, schema=GRADES), average
    ).to_pylist()
    for metric in ("groundedness", "completeness"):
        assert m[f"{metric}_mean"] == pytest.approx(
            m[f"{metric}_at_1"] + 0.5 * (m[f"{metric}_at_05"] - m[f"{metric}_at_1"])
        )


def test_one_row_per_model_setting_and_n():
    answers = pa.Table.from_pylist(
        [
            _answer("a", [("t1", "text")], [["t1"]]),
            _answer("a", [("t1", "text"), ("t2", "text"), ("i1", "image")], [["t2", "i1"]], setting="two-step", n=4),
            _answer("b", [], [], status="unreadable", setting="two-step", n=4) | {"queries": []},
        ],
        schema=ANSWERS,
    )
    grades = pa.Table.from_pylist(
        [_grade("a", "groundedness", 0, 1.0), _grade("a", "groundedness", 0, 0.5, setting="two-step", n=4)],
        schema=GRADES,
    )
    rows = compute_answer_metrics(answers, grades).to_pylist()
    assert [(r["setting"], r["n_queries"], r["answered"], r["failed"]) for r in rows] == [
        ("text", 1, 1, 0),
        ("two-step", 4, 1, 1),
    ]
    assert [r["groundedness_mean"] for r in rows] == [1.0, 0.5]  # each run its own grades
    # retrieved: over the questions whose queries were read (b's were not); used: over the answered
    assert (rows[1]["retrieved_text"], rows[1]["retrieved_image"], rows[1]["used_image"]) == (2.0, 1.0, 1.0)
    md = answer_metrics_markdown(compute_answer_metrics(answers, grades))
    assert "| m + TextRAG |" in md and "| m + Two-step MultiRAG (N = 4) |" in md


def test_ndcg_recall_and_hits_by_hand():
    ranking = ["x", "r1", "y", "r2", "z"]
    relevant = {"r1", "r2", "r3"}
    # DCG = 1/log2(3) + 1/log2(5); IDCG = 1 + 1/log2(3) + 1/log2(4)
    expected = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3) + 0.5)
    assert ndcg_at_k(ranking, relevant, 10) == pytest.approx(expected)
    # = sklearn.metrics.ndcg_score([[0, 1, 0, 1, 0, 1]], [[6, 5, 4, 3, 2, 0]], k=5): r3 is never retrieved
    assert ndcg_at_k(ranking, relevant, 10) == pytest.approx(0.498189, abs=1e-6)
    assert ndcg_at_k(ranking, relevant, 1) == 0.0
    assert ndcg_at_k(["r1"], {"r1"}, 10) == 1.0
    assert recall_at_k(ranking, relevant, 100) == pytest.approx(2 / 3)
    assert recall_at_k(ranking, relevant, 2) == pytest.approx(1 / 3)
    assert first_hit(ranking, relevant) == 2 and first_hit(["x"], relevant) is None
    hits = hit_at_k([2, None, 1, 5])
    assert (hits[1], hits[2], hits[4], hits[5], hits[10]) == (0.25, 0.5, 0.5, 0.75, 0.75)
    with pytest.raises(ValueError):
        ndcg_at_k(ranking, set())


def hand_ndcg(ranking: list[str], relevant: set[str], k: int) -> float:
    """NDCG@k as mmcurate computed it by hand before trec_eval (ir_measures) did."""
    dcg = sum(1.0 / math.log2(i + 1) for i, doc in enumerate(ranking[:k], 1) if doc in relevant)
    return dcg / sum(1.0 / math.log2(i + 1) for i in range(1, min(len(relevant), k) + 1))


def hand_recall(ranking: list[str], relevant: set[str], k: int) -> float:
    return len(set(ranking[:k]) & relevant) / len(relevant)


DOCS = st.sampled_from([f"d{i}" for i in range(30)])


@settings(max_examples=300, deadline=None)
@given(
    ranking=st.lists(DOCS, max_size=25, unique=True),
    relevant=st.sets(DOCS, min_size=1, max_size=8),
    k=st.integers(1, 30),
)
def test_trec_eval_measures_are_the_numbers_computed_by_hand_before(ranking, relevant, k):
    assert ndcg_at_k(ranking, relevant, k) == pytest.approx(hand_ndcg(ranking, relevant, k), abs=1e-12)
    assert recall_at_k(ranking, relevant, k) == pytest.approx(hand_recall(ranking, relevant, k), abs=1e-12)


def test_hit_at_k_plot(tmp_path):
    path = plot_hit_at_k({"text": hit_at_k([1, 3, None]), "image": hit_at_k([2])}, tmp_path / "hit.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
