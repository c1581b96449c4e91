"""The RefLVQA evaluation grid on scripted models: search queries and citations read strictly
(retry, then a counted error), which documents each setting may show, N x K documents
pooled once each, Two-step's captions and combined answer, every metric's arithmetic, and
retrieval scored against the release's citations."""
from __future__ import annotations

import pytest

from mmcurate.benchmarks.reflvqa import RefLVQAEvalConfig
from mmcurate.core.errors import MmcurateError
from mmcurate.evaluation.answer_metrics import compute_answer_metrics
from mmcurate.evaluation.graders import METRICS, ModelGrader, Unit, make_grader
from mmcurate.evaluation.reflvqa import NO_CITATION, evaluate_reflvqa, kept_note, settings_by_searched
from mmcurate.evaluation.reflvqa_prompts import NO_CAPTION
from mmcurate.evaluation.reflvqa_queries import parse_queries
from mmcurate.evaluation.reflvqa_report import write_reflvqa_evaluation
from mmcurate.evaluation.reflvqa_settings import run_options
from mmcurate.evaluation.scenarios import EvaluationError
from mmcurate.retrieval.rag import BOTH, Hit


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
    "image:cc": {"doc_id": "image:cc", "modality": "image", "text": None, "image": "cc", "title": "A red robin"},
}
FUSED = [Hit("t1", "text", 3.0), Hit("t2", "text", 2.0), Hit("image:bb", "image", 1.0), Hit("t3", "text", 0.5),
         Hit("image:cc", "image", 0.4)]


class StubCorpus:
    """Stub retrieval: a ranking per query text (``FUSED`` for any other), of which a setting
    sees the documents of the modalities it searches, in the same order."""

    first = [Hit("t3", "text", 0.9), Hit("t1", "text", 0.8), Hit("t2", "text", 0.7), Hit("image:bb", "image", 0.1)]

    def __init__(self, rankings=None):
        self.rankings = rankings or {}
        self.searches = []  # (query, modalities)

    def first_stage(self, queries, searched=BOTH, images=(), k=None):
        return [[h for h in self.first if h.modality in searched][:k] for _ in queries]

    def rank(self, queries, searched=BOTH, images=()):
        self.searches += [(q, tuple(searched)) for q in queries]
        return [[h for h in self.rankings.get(q, FUSED) if h.modality in searched] for q in queries]

    def score_scale(self, searched=BOTH):
        return None if set(searched) == set(BOTH) else "cosine"


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
        {"when_all": ["Search query:"], "answer": "tower facts"},  # every question's one search query
        # q1: three sentences, citing [1] (t1), [2] (t2) and nothing
        {"when_all": ["Q-ONE"], "answer": "The tower is 300 m tall [1]. It opened in 1889 [2]. It is pretty."},
        # q2: a citation of a document that was not shown, then a good answer on the retry
        {"when_all": ["Q-TWO", "could not be read"], "answer": "It is a robin [3]."},
        {"when_all": ["Q-TWO"], "answer": "It is a robin [7]."},
        {"when_all": ["Q-THREE"], "answer": "Maybe [1-2]."},
    ], default=None)  # q4: no rule, no default: its answer call fails


def run(world, graders, corpus=None, settings=("multi",), queries=(1,), **cfg):
    model = answering_model(world)
    pool = world.pool
    chosen = {metric: make_grader(name, metric, pool) for metric, name in graders.items()}
    config = RefLVQAEvalConfig.model_validate({"top_k": 3, "doc_chars": 12, **cfg})
    return evaluate_reflvqa(QA, DOCS, corpus or StubCorpus(), pool, model, chosen, config, list(settings),
                            list(queries), run_id="e")


def test_answers_citations_and_statuses(world, graders):
    out = run(world, graders)
    answers = {r["sample_id"]: r for r in out.answers.to_pylist()}
    assert [d["doc_id"] for d in answers["q1"]["retrieved"]] == ["t1", "t2", "image:bb"]  # reranked, top 3
    assert (answers["q1"]["setting"], answers["q1"]["n_queries"], answers["q1"]["queries"]) == ("multi", 1, ["tower facts"])
    assert [(s["text"], s["citations"]) for s in answers["q1"]["sentences"]] == [
        ("The tower is 300 m tall.", ["t1"]), ("It opened in 1889.", ["t2"]), ("It is pretty.", [])]
    assert answers["q2"]["status"] == "answered" and answers["q2"]["answer"] == "It is a robin [3]."
    assert answers["q2"]["sentences"][0]["citations"] == ["image:bb"]
    assert answers["q3"]["status"] == "unreadable" and "citations of documents 1-3" in answers["q3"]["error"]
    assert answers["q4"]["status"] == "failed" and answers["q4"]["sentences"] == []
    assert out.counts["answered"] == 2 and out.counts["failed_calls"] == 1 and out.counts["unreadable"] == 1
    # the documents reach the model numbered and cut to doc_chars
    prompt = str(next(m for m in world.pool.messages["vlm"] if "Q-ONE" in str(m) and "Answer:" in str(m)))
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
    assert m["completeness_mean"] == pytest.approx((1.0 + 0.0 + 0.5) / 3)
    assert m["completeness_at_1"] == pytest.approx(1 / 3) and m["completeness_at_05"] == pytest.approx(2 / 3)
    assert m["relevance_mean"] == pytest.approx(4.5)
    assert (m["answered"], m["failed"]) == (2, 2)
    assert (m["retrieved_text"], m["retrieved_image"]) == (2.0, 1.0)
    assert (m["used_text"], m["used_image"]) == (1.0, 0.5)


def test_retrieval_is_scored_per_set_of_modalities_against_the_release_citations(world, graders):
    out = run(world, graders, settings=("text", "multi"))
    r = {(row["searched"], row["sample_id"]): row for row in out.retrieval.to_pylist()}
    # q1 cites t1, t2; first stage t3, t1, t2: DCG = 1/log2(3) + 1/log2(4), IDCG = 1 + 1/log2(3)
    assert r[("text+image", "q1")]["relevant"] == 2
    assert r[("text+image", "q1")]["ndcg_at_10"] == pytest.approx((0.6309298 + 0.5) / 1.6309298)
    assert r[("text+image", "q1")]["recall_at_100"] == 1.0 and r[("text+image", "q1")]["first_hit"] == 1
    assert r[("text+image", "q2")]["first_hit"] == 3 and r[("text+image", "q2")]["ndcg_at_10"] == pytest.approx(
        1 / 2.321928)  # 1/log2(5)
    assert r[("text", "q1")]["relevant"] == 2 and r[("text", "q2")]["relevant"] == 0  # q2 cites an image only
    assert r[("text+image", "q3")]["relevant"] == 0 and r[("text+image", "q3")]["first_hit"] is None


def test_each_setting_shows_only_the_documents_it_may(world, graders):
    mixed = {"tower facts": [Hit("t1", "text", 3), Hit("image:bb", "image", 2), Hit("t2", "text", 1),
                             Hit("image:cc", "image", 0.5), Hit("t3", "text", 0.1)]}
    out = run(world, graders, StubCorpus(mixed), settings=("text", "image", "multi", "two-step"), top_k=2)
    q1 = {r["setting"]: r for r in out.answers.to_pylist() if r["sample_id"] == "q1"}
    assert {s: [d["doc_id"] for d in r["retrieved"]] for s, r in q1.items()} == {
        "text": ["t1", "t2"], "image": ["image:bb", "image:cc"], "multi": ["t1", "image:bb"],
        "two-step": ["t1", "image:bb"]}  # Two-step: MultiRAG's documents, split
    assert [s["step"] for s in q1["two-step"]["steps"]] == ["text", "image"]
    image_only = next(m for m in world.pool.messages["vlm"] if "Q-ONE" in str(m) and "[2] Image" in str(m)
                      and "[1] Image" in str(m))
    assert "DOC-T" not in str(image_only)
    per_modality = run(world, graders, StubCorpus(mixed), settings=("two-step",), top_k=2,
                       two_step_documents="per_modality")
    [q1] = [r for r in per_modality.answers.to_pylist() if r["sample_id"] == "q1"]
    assert [d["doc_id"] for d in q1["retrieved"]] == ["t1", "t2", "image:bb", "image:cc"]  # text first, then images
    assert [s["step"] for s in q1["steps"]] == ["text", "image"]
    fused_text_only = run(world, graders, settings=("two-step",), top_k=2)  # FUSED's top 2 holds no image
    [q1] = [r for r in fused_text_only.answers.to_pylist() if r["sample_id"] == "q1"]
    assert [s["step"] for s in q1["steps"]] == ["text"] and q1["status"] == "answered"


def test_n_queries_pool_their_top_k_once_each_in_query_order(world, graders):
    corpus = StubCorpus({"tower height": [Hit("t1", "text", 1), Hit("t2", "text", 1), Hit("t3", "text", 1)],
                         "tower age": [Hit("t2", "text", 1), Hit("t3", "text", 1)],
                         "tower paint": [Hit("t3", "text", 1), Hit("t1", "text", 1)]})
    model = world.add("vlm", [
        {"when_all": ["Q-ONE", "Search queries:", "could not be read"],
         "answer": '"tower height", "tower age", "tower paint", "tower height"'},  # the paper's quoted list
        {"when_all": ["Q-ONE", "Search queries:"], "answer": "1. tower height\n2. tower age\n3. tower paint"},
        {"when_all": ["Search queries:"], "answer": "just one query"},
        {"when_all": ["Q-ONE"], "answer": "Tall [1]. Old [2]. Painted [3]."},
    ], default=None)
    chosen = {metric: make_grader("lexical", metric) for metric in METRICS}
    config = RefLVQAEvalConfig.model_validate({"top_k": 2})
    out = evaluate_reflvqa(QA[:2], DOCS, corpus, world.pool, model, chosen, config, ["text"], [4], run_id="e")
    q1, q2 = out.answers.to_pylist()
    assert q1["queries"] == ["tower height", "tower age", "tower paint", "tower height"]  # read on the retry
    assert [d["doc_id"] for d in q1["retrieved"]] == ["t1", "t2", "t3"]  # 4 x 2 found, each once, query order
    assert [s["citations"] for s in q1["sentences"]] == [["t1"], ["t2"], ["t3"]]
    assert (q2["status"], q2["queries"], q2["retrieved"]) == ("unreadable", [], [])  # one query for four, twice
    assert q2["error"].startswith("search queries: unparsable answer (expected exactly 4 search queries)")
    assert out.counts["queries_unreadable_n4"] == 1
    # the questions for Table 4's ranking, then q1's four queries (q2 wrote none)
    assert [q for q, _ in corpus.searches] == [QA[0]["question"], QA[1]["question"], "tower height", "tower age",
                                               "tower paint", "tower height"]


@pytest.mark.parametrize(("reply", "n", "queries"), [
    ("tower height", 1, ("tower height",)),
    ('  "Eiffel tower height"  ', 1, ("Eiffel tower height",)),
    ("1. a b\n2) c d\n- e\n* f", 4, ("a b", "c d", "e", "f")),
    ('"a", "b", "c", "d"', 4, ("a", "b", "c", "d")),
    ("Search queries:\n1. a\n2. b", 2, None),  # a preamble is a third line
    ("a\nb", 1, None), ("a", 2, None), ("", 1, None), ("1. ...", 1, None),
])
def test_queries_are_read_strictly(reply, n, queries):
    assert parse_queries(reply, n) == queries


def two_step_model(world):
    return world.add("vlm", [
        {"when_all": ["Search query:"], "answer": "tower facts"},
        {"when_all": ["Combined answer:", "Q-ONE"], "answer": "The tower is tall and red [1, 4]."},
        {"when_all": ["Combined answer:", "Q-TWO"], "answer": "A robin [5]."},  # neither answer cites [5]
        {"when_all": ["Caption:"], "answer": "It is red [1]."},  # the image step: its documents carry captions
        {"when_all": ["DOC-T1"], "answer": "The tower is tall [1]."},
    ], default="Nothing [1].")


def test_two_step_combines_both_answers_keeping_their_citations(world):
    model = two_step_model(world)
    chosen = {metric: make_grader("lexical", metric) for metric in METRICS}
    config = RefLVQAEvalConfig.model_validate({"top_k": 5, "doc_chars": 40})
    out = evaluate_reflvqa(QA[:2], DOCS, StubCorpus(), world.pool, model, chosen, config, ["two-step"], [1],
                           run_id="e")
    q1, q2 = out.answers.to_pylist()
    # the shared documents split: text t1, t2, t3 numbered 1-3, then images bb, cc as 4-5
    assert [d["doc_id"] for d in q1["retrieved"]] == ["t1", "t2", "t3", "image:bb", "image:cc"]
    assert [(s["step"], s["answer"]) for s in q1["steps"]] == [("text", "The tower is tall [1]."),
                                                              ("image", "It is red [1].")]
    assert q1["sentences"] == [{"index": 0, "text": "The tower is tall and red.", "citations": ["t1", "image:bb"]}]
    merge = next(m for m in world.pool.messages["vlm"] if "Combined answer:" in str(m) and "Q-ONE" in str(m))
    assert "text documents: The tower is tall [1]." in merge[1]["content"]
    assert "image documents: It is red [4]." in merge[1]["content"]  # the image answer renumbered after the texts
    # a combination citing a number neither answer cites is retried, then an error
    assert q2["status"] == "unreadable" and q2["error"].startswith("combined answer: invalid reply: it cites 5")
    [m] = compute_answer_metrics(out.answers, out.grades).to_pylist()
    assert (m["used_text"], m["used_image"]) == (1.0, 1.0)
    assert out.counts["two_step_answers_combined"] == 1


def test_two_step_captions_from_a_model_or_the_source(world):
    model = two_step_model(world)
    chosen = {metric: make_grader("lexical", metric) for metric in METRICS}
    config = RefLVQAEvalConfig.model_validate({"top_k": 5})
    out = evaluate_reflvqa(QA[:1], DOCS, StubCorpus(), world.pool, model, chosen, config, ["two-step"], [1])
    captions = {d["doc_id"]: d["caption"] for d in out.answers.to_pylist()[0]["retrieved"]}
    assert captions == {"t1": None, "t2": None, "t3": None, "image:bb": None, "image:cc": "A red robin"}
    image_step = next(m for m in world.pool.messages["vlm"] if "Caption:" in str(m))
    texts = [p["text"] for p in image_step[1]["content"] if p["type"] == "text"]
    assert texts[1:5] == ["[1] Image", NO_CAPTION, "[2] Image", "Caption: A red robin"]
    assert out.counts["two_step_image_documents_without_caption"] == 1

    captioner = world.add("cap", [{"when_all": ["Q-ONE", "Description:"], "answer": " A robin on a branch. "}])
    model = two_step_model(world)
    config = RefLVQAEvalConfig.model_validate({"top_k": 5, "captioner": captioner})
    out = evaluate_reflvqa(QA[:1], DOCS, StubCorpus(), world.pool, model, chosen, config, ["two-step"], [1])
    assert {d["caption"] for d in out.answers.to_pylist()[0]["retrieved"] if d["modality"] == "image"} == {
        "A robin on a branch."}
    assert [stage for stage, _ in world.sent[captioner]] == ["evaluate.reflvqa.two-step.n1.caption"] * 2


def test_the_table_has_one_row_per_setting_and_n(world, graders, tmp_path):
    out = run(world, graders, settings=("text", "two-step"), queries=(1, 2))
    text = write_reflvqa_evaluation(out, tmp_path, "t", settings_by_searched(["text", "two-step"], "shared"), [])
    rows = [line.split(" | ")[0] for line in text.splitlines() if line.startswith("| vlm + ")]
    assert rows == ["| vlm + TextRAG", "| vlm + Two-step MultiRAG", "| vlm + TextRAG (N = 2)",
                    "| vlm + Two-step MultiRAG (N = 2)"]
    assert "| text documents | TextRAG |" in text and "| text + image (one ranked list) | Two-step MultiRAG |" in text
    assert (tmp_path / "hit_at_k.png").stat().st_size > 1000


def test_grid_options_are_checked():
    assert run_options({}) == {"settings": ["text", "image", "multi", "two-step"], "queries": [1]}
    assert run_options({"settings": ["two-step", "two-step"], "queries": [4, 1]}) == {
        "settings": ["two-step"], "queries": [4, 1]}
    with pytest.raises(EvaluationError, match="unknown RefLVQA setting.* multirag; known: text, image, multi, two-step"):
        run_options({"settings": ["multirag"]})
    with pytest.raises(EvaluationError, match="--queries must be between 1 and 10, got 0, 11"):
        run_options({"queries": [0, 11]})


def test_a_model_grader_asks_once_per_unit_and_names_itself(world):
    m = world.add("rate", [{"when_all": ["Q-X"], "answer": "**7**"}], default="seven")
    grader = make_grader(m, "relevance", world.pool)
    assert isinstance(grader, ModelGrader) and grader.name == "llm:rate"
    got = grader.grade([Unit("a", "relevance", "Q-X?", response="r"), Unit("b", "relevance", "Q-Y?", response="r")])
    assert [g.value for g in got] == [7.0, None]  # "seven" is not a digit: retried, then an error
    assert len(world.sent[m]) == 3 and {stage for stage, _ in world.sent[m]} == {"evaluate.reflvqa.relevance"}
    assert set(METRICS) == {"groundedness", "completeness", "relevance"}


class ScoredCorpus(StubCorpus):
    """Scores in [0, 1] (a sigmoid reranker): Q-ONE's query finds two clearly relevant
    documents, the other questions' queries nothing above CRUISE's floor."""

    def score_scale(self, searched=BOTH):
        return "unit"

    def rank(self, queries, searched=BOTH, images=()):
        good = [Hit("t1", "text", 0.95), Hit("t2", "text", 0.9), Hit("t3", "text", 0.3)]
        poor = [Hit("t1", "text", 0.08), Hit("t2", "text", 0.05), Hit("t3", "text", 0.02)]
        return [list(good if q == "tall tower" else poor) for q in queries]


def test_the_mad_cutoff_takes_top_ks_place(world, graders):
    cutoff = RefLVQAEvalConfig.model_validate({"cutoff": "mad:0.5:1.5:3"}).cutoff
    assert RefLVQAEvalConfig().cutoff is None and str(RefLVQAEvalConfig.model_validate({"cutoff": "mad"}).cutoff) == "mad"
    with pytest.raises(ValueError, match="unknown spec 'madd'"):
        RefLVQAEvalConfig.model_validate({"cutoff": "madd"})
    model = world.add("vlm", [{"when_all": ["Q-ONE", "Search query:"], "answer": "tall tower"},
                              {"when_all": ["Search query:"], "answer": "something"}], default="Fine.")
    chosen = {metric: make_grader("lexical", metric) for metric in METRICS}
    config = RefLVQAEvalConfig.model_validate({"top_k": 3, "cutoff": "mad:0.5:1.5:3"})
    out = evaluate_reflvqa(QA, DOCS, ScoredCorpus(), world.pool, model, chosen, config, ["text"], [1], run_id="e")
    kept = {r["sample_id"]: [d["doc_id"] for d in r["retrieved"]] for r in out.answers.to_pylist()}
    # Q-ONE: median .9, MAD .05, theta = max(.5, .825) keeps .95 and .9; the rest: all below .5
    assert kept == {"q1": ["t1", "t2"], "q2": [], "q3": [], "q4": []}
    assert kept_note(out.answers, cutoff, 100) == (
        "cutoff mad:0.5:1.5:3 on the 100 reranked candidates, documents kept per question and query: text N=1: "
        "min 0.00, mean 0.50, max 2.00 (3 of 4 questions kept none)")
    assert kept_note(out.answers, None, 100) is None
    with pytest.raises(MmcurateError, match="the text\\+image ranking fuses text and image rankings"):
        evaluate_reflvqa(QA, DOCS, StubCorpus(), world.pool, model, chosen, config, ["multi"], [1])


@pytest.mark.parametrize(("section", "message"), [
    ("{query_embedding: mean}", "evaluation.reflvqa.query_embedding: Input should be 'average' or 'text'"),
    ("{two_step_documents: both}", "evaluation.reflvqa.two_step_documents: Input should be 'shared' or 'per_modality'"),
    ("{query_max_tokens: 0}", "evaluation.reflvqa.query_max_tokens: Input should be greater than or equal to 1"),
    ("{caption_max_tokens: 0}", "evaluation.reflvqa.caption_max_tokens: Input should be greater than or equal to 1"),
    ("{captioner: ''}", "evaluation.reflvqa.captioner: String should have at least 1 character"),
    ("{captioner: nobody}", "unknown model(s) ['nobody']"),
    ("{captioner: blind}", "evaluation.reflvqa.captioner: model 'blind' does not see images (vision: false)"),
])
def test_the_grids_readings_are_checked_at_load(tmp_path, section, message):
    from mmcurate.core.config import load_config
    from mmcurate.core.errors import ConfigError

    path = tmp_path / "c.yaml"
    path.write_text("models:\n  blind: {backend: scripted, script: r.jsonl}\n  eyes: {backend: scripted, script: "
                    f"r.jsonl, vision: true}}\nevaluation:\n  reflvqa: {section}\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert message in str(err.value) and "\n" not in str(err.value)
    path.write_text(path.read_text().replace(section, "{captioner: eyes, query_embedding: text}"))
    assert load_config(path).evaluation.reflvqa.captioner == "eyes"


def test_a_rerun_of_the_grid_calls_no_model(world):
    """Every call of the grid (queries, answers, captions, combinations, grades) goes through
    the response cache: a rerun after a crash asks nothing twice."""
    model = two_step_model(world)
    captioner = world.add("cap", [], default="A robin.")
    judge = world.add("judge", [], default="fully supported")
    config = RefLVQAEvalConfig.model_validate({"top_k": 5, "captioner": captioner})

    def grid():
        graders = {metric: make_grader(judge if metric == "groundedness" else "lexical", metric, world.pool)
                   for metric in METRICS}
        return evaluate_reflvqa(QA[:2], DOCS, StubCorpus(), world.pool, model, graders, config,
                                ["multi", "two-step"], [1, 2])

    first = grid()
    calls = sum(r["calls"] for r in world.counter.rows())
    again = grid()
    assert calls > 0 and sum(r["calls"] for r in world.counter.rows()) == calls
    assert again.answers.drop_columns(["run_id"]).equals(first.answers.drop_columns(["run_id"]))
