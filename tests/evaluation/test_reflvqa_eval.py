"""The RefLVQA RAG run on scripted models: citations read strictly (retry, then a counted
error), every metric's arithmetic pinned, retrieval scored against the release's citations."""
from __future__ import annotations

import pytest

from mmcurate.evaluation.answer_metrics import compute_answer_metrics
from mmcurate.evaluation.graders import METRICS, ModelGrader, Unit, make_grader
from mmcurate.core.config import RefLVQAEvalConfig
from mmcurate.evaluation.reflvqa import NO_CITATION, evaluate_reflvqa, kept_note
from mmcurate.retrieval.rag import Hit


def sentence(i, text, cites=(), images=(), checkable=True, flagged=False):
    return {"index": i, "text": text, "fact_checkable": checkable, "text_citations": list(cites),
            "image_citations": list(images), "flagged": flagged}


QA = [
    {"sample_id": "q1", "question": "Q-ONE how tall is the tower?", "images": ["aa" * 32], "answer": "...",
     "sentences": [sentence(0, "The tower is 300 m tall.", ["t1"]), sentence(1, "It opened in 1889.", ["t2"]),
                   sentence(2, "It was painted red.", [], flagged=True), sentence(3, "Lovely!", checkable=False)]},
    {"sample_id": "q2", "question": "Q-TWO what is this bird?", "images": [], "answer": "...",
     "sentences": [sentence(0, "It is a robin.", [], ["image:bb"])]},
    {"sample_id": "q3", "question": "Q-THREE unreadable?", "images": [], "answer": "...", "sentences": []},
    {"sample_id": "q4", "question": "Q-FOUR nobody answers?", "images": [], "answer": "...", "sentences": []},
]
DOCS = {
    "t1": {"doc_id": "t1", "modality": "text", "text": "DOC-T1 the tower is 300 m tall.", "image": None, "title": "Tower"},
    "t2": {"doc_id": "t2", "modality": "text", "text": "DOC-T2 opened 1889.", "image": None, "title": ""},
    "t3": {"doc_id": "t3", "modality": "text", "text": "DOC-T3 unrelated.", "image": None, "title": ""},
    "image:bb": {"doc_id": "image:bb", "modality": "image", "text": None, "image": "bb", "title": None},
}


class FixedCorpus:
    """Stub retrieval: the same two rankings for every question."""

    first = [Hit("t3", "text", 0.9), Hit("t1", "text", 0.8), Hit("t2", "text", 0.7), Hit("image:bb", "image", 0.1)]
    ranked = [Hit("t1", "text", 3.0), Hit("t2", "text", 2.0), Hit("image:bb", "image", 1.0), Hit("t3", "text", 0.5)]

    def first_stage(self, queries, k=None):
        return [list(self.first)[:k] for _ in queries]

    def rank(self, queries):
        return [list(self.ranked) for _ in queries]


@pytest.fixture
def graders(world):
    grd = world.add("grd", [
        {"when_all": ["Statement: The tower is 300 m tall."], "answer": "Fully supported."},
        {"when_all": ["Statement: It opened in 1889."], "answer": "partially supported"},
        {"when_all": ["Statement: It is a robin.", "could not be read"], "answer": "still thinking"},
        {"when_all": ["Statement: It is a robin."], "answer": "The image shows a robin, so: fully supported"},
    ], default="not supported")
    com = world.add("com", [
        {"when_all": ["Statement: The tower is 300 m tall."], "answer": "FULLY COMPLETE"},
        {"when_all": ["Statement: It opened in 1889."], "answer": "not complete"},
    ], default="partially complete")
    rel = world.add("rel", [{"when_all": ["Q-ONE"], "answer": "6"}], default="3")
    return {"groundedness": grd, "completeness": com, "relevance": rel}


def answering_model(world):
    return world.add("vlm", [
        # q1: three sentences, citing [1] (t1), [2] (t2) and nothing
        {"when_all": ["Q-ONE"], "answer": "The tower is 300 m tall [1]. It opened in 1889 [2]. It is pretty."},
        # q2: a citation of a document that was not shown, then a good answer on the retry
        {"when_all": ["Q-TWO", "could not be read"], "answer": "It is a robin [3]."},
        {"when_all": ["Q-TWO"], "answer": "It is a robin [7]."},
        {"when_all": ["Q-THREE"], "answer": "Maybe [1-2]."},
    ], default=None)  # q4: no rule, no default: the call fails


def run(world, graders, top_k=3):
    model = answering_model(world)
    pool = world.pool
    chosen = {metric: make_grader(name, metric, pool) for metric, name in graders.items()}
    return evaluate_reflvqa(QA, DOCS, FixedCorpus(), pool, model, chosen, top_k=top_k, doc_chars=12, run_id="e")


def test_answers_citations_and_statuses(world, graders):
    out = run(world, graders)
    answers = {r["sample_id"]: r for r in out.answers.to_pylist()}
    assert [d["doc_id"] for d in answers["q1"]["retrieved"]] == ["t1", "t2", "image:bb"]  # reranked, top 3
    assert [(s["text"], s["citations"]) for s in answers["q1"]["sentences"]] == [
        ("The tower is 300 m tall.", ["t1"]), ("It opened in 1889.", ["t2"]), ("It is pretty.", [])]
    assert answers["q2"]["status"] == "answered" and answers["q2"]["answer"] == "It is a robin [3]."
    assert answers["q2"]["sentences"][0]["citations"] == ["image:bb"]
    assert answers["q3"]["status"] == "unreadable" and "citations of documents 1-3" in answers["q3"]["error"]
    assert answers["q4"]["status"] == "failed" and answers["q4"]["sentences"] == []
    assert out.counts["answered"] == 2 and out.counts["failed_calls"] == 1 and out.counts["unreadable_citations"] == 1
    # the documents reach the model numbered and cut to doc_chars
    prompt = str(world.pool.messages["vlm"][0])
    assert "[1] Tower: DOC-T1 the t" in prompt and "DOC-T1 the tower" not in prompt and "[3] Image" in prompt


def test_every_metric_by_hand(world, graders):
    out = run(world, graders)
    grades = {(r["sample_id"], r["metric"], r["unit"]): r for r in out.grades.to_pylist()}
    assert grades[("q1", "groundedness", 0)]["grade"] == 1.0
    assert grades[("q1", "groundedness", 1)]["grade"] == 0.5
    assert grades[("q1", "groundedness", 2)]["grade"] == 0.0
    assert grades[("q1", "groundedness", 2)]["evaluator"] == NO_CITATION  # no citation: 0 without a call
    assert grades[("q2", "groundedness", 0)]["grade"] is None  # unreadable twice: an error, never a guess
    assert "unparsable" in grades[("q2", "groundedness", 0)]["error"]
    # completeness: the fact-checkable, supported dataset sentences 0 and 1 (2 is flagged, 3 not checkable)
    assert {k[2]: g["grade"] for k, g in grades.items() if k[:2] == ("q1", "completeness")} == {0: 1.0, 1: 0.0}
    assert grades[("q2", "completeness", 0)]["grade"] == 0.5
    assert grades[("q1", "relevance", 0)]["grade"] == 6.0 and grades[("q2", "relevance", 0)]["grade"] == 3.0
    assert out.counts["evaluator_errors"] == 1 and out.counts["flagged_dataset_sentences"] == 1
    [m] = compute_answer_metrics(out.answers, out.grades).to_pylist()
    assert m["groundedness_mean"] == pytest.approx(0.5)  # q1 only: (1 + 0.5 + 0) / 3; q2's grade failed
    assert m["groundedness_at_1"] == pytest.approx(1 / 3) and m["groundedness_at_05"] == pytest.approx(2 / 3)
    assert m["groundedness_errors"] == 1
    assert m["completeness_mean"] == pytest.approx((0.5 + 0.5) / 2)
    assert m["completeness_at_1"] == pytest.approx(1 / 3) and m["completeness_at_05"] == pytest.approx(2 / 3)
    assert m["relevance_mean"] == pytest.approx(4.5)
    assert (m["answered"], m["failed"]) == (2, 2)
    assert (m["retrieved_text"], m["retrieved_image"]) == (2.0, 1.0)
    assert (m["used_text"], m["used_image"]) == (1.0, 0.5)


def test_retrieval_is_scored_against_the_release_citations(world, graders):
    out = run(world, graders)
    r = {row["sample_id"]: row for row in out.retrieval.to_pylist()}
    # q1 cites t1, t2; first stage t3, t1, t2: DCG = 1/log2(3) + 1/log2(4), IDCG = 1 + 1/log2(3)
    assert r["q1"]["relevant"] == 2
    assert r["q1"]["ndcg_at_10"] == pytest.approx((0.6309298 + 0.5) / 1.6309298)
    assert r["q1"]["recall_at_100"] == 1.0 and r["q1"]["first_hit"] == 1
    assert r["q2"]["first_hit"] == 3 and r["q2"]["ndcg_at_10"] == pytest.approx(1 / 2.321928)  # 1/log2(5)
    assert r["q3"]["relevant"] == 0 and r["q3"]["ndcg_at_10"] is None and r["q3"]["first_hit"] is None
    assert out.counts["questions_without_relevant_documents"] == 2


def test_a_model_grader_asks_once_per_unit_and_names_itself(world):
    m = world.add("rate", [{"when_all": ["Q-X"], "answer": "**7**"}], default="seven")
    grader = make_grader(m, "relevance", world.pool)
    assert isinstance(grader, ModelGrader) and grader.name == "llm:rate"
    got = grader.grade([Unit("a", "relevance", "Q-X?", response="r"), Unit("b", "relevance", "Q-Y?", response="r")])
    assert [g.value for g in got] == [7.0, None]  # "seven" is not a digit: retried, then an error
    assert len(world.sent[m]) == 3
    assert set(METRICS) == {"groundedness", "completeness", "relevance"}


class ScoredCorpus(FixedCorpus):
    """Scores in [0, 1] (a sigmoid reranker): Q-ONE finds two clearly relevant documents, the
    other questions nothing above CRUISE's floor."""

    score_scale = "unit"

    def rank(self, queries):
        good = [Hit("t1", "text", 0.95), Hit("t2", "text", 0.9), Hit("image:bb", "image", 0.4),
                Hit("t3", "text", 0.3)]
        poor = [Hit("t1", "text", 0.08), Hit("t2", "text", 0.05), Hit("t3", "text", 0.02)]
        return [list(good if "Q-ONE" in q else poor) for q in queries]


def test_the_mad_cutoff_takes_top_ks_place(world, graders):
    cutoff = RefLVQAEvalConfig.model_validate({"cutoff": "mad:0.5:1.5:3"}).cutoff
    assert RefLVQAEvalConfig().cutoff is None and str(RefLVQAEvalConfig.model_validate({"cutoff": "mad"}).cutoff) == "mad"
    with pytest.raises(ValueError, match="unknown spec 'madd'"):
        RefLVQAEvalConfig.model_validate({"cutoff": "madd"})
    model = answering_model(world)
    chosen = {metric: make_grader(name, metric, world.pool) for metric, name in graders.items()}
    out = evaluate_reflvqa(QA, DOCS, ScoredCorpus(), world.pool, model, chosen, top_k=3,
                           doc_chars=12, run_id="e", cutoff=cutoff)
    kept = {r["sample_id"]: [d["doc_id"] for d in r["retrieved"]] for r in out.answers.to_pylist()}
    # Q-ONE: median .65, MAD .275, theta = max(.5, .2375) = .5 keeps .95 and .9; the rest: all below .5
    assert kept == {"q1": ["t1", "t2"], "q2": [], "q3": [], "q4": []}
    assert kept_note(out.answers, cutoff, 100) == (
        "cutoff mad:0.5:1.5:3 on the 100 reranked candidates: documents kept per question min 0, mean 0.50, max 2 "
        "(3 of 4 questions kept none)")
    assert kept_note(out.answers, None, 100) is None
