"""The RefLVQA evaluation grid on scripted models: search queries and citations read strictly
(retry, then a counted error), which documents each setting may show, N x K documents
pooled once each, Two-step's captions and combined answer, every metric's arithmetic, and
retrieval scored against the release's citations."""

from __future__ import annotations

import pytest

from mmcurate.benchmarks.reflvqa import RefLVQAEvalConfig
from mmcurate.core.errors import MmcurateError
from mmcurate.evaluation.failures import EvaluationError
from mmcurate.evaluation.reflvqa.answer_metrics import compute_answer_metrics
from mmcurate.evaluation.reflvqa.graders import METRICS, ModelGrader, Unit, make_grader
from mmcurate.evaluation.reflvqa.grid import (
    INVALID_CITATION,
    NO_CITATION,
    evaluate_reflvqa,
    kept_note,
    settings_by_searched,
)
from mmcurate.evaluation.reflvqa.prompts import NO_CAPTION
from mmcurate.evaluation.reflvqa.queries import parse_queries
from mmcurate.evaluation.reflvqa.report import write_reflvqa_evaluation
from mmcurate.evaluation.reflvqa.settings import run_options
from mmcurate.retrieval.rag import BOTH, Hit


def sentence(i, text, cites=(), images=(), checkable=True, flagged=False):
    return {
        "index": i,
        "text": text,
        "fact_checkable": checkable,
        "text_citations": list(cites),
        "image_citations": list(images),
        "flagged": flagged,
    }


QA = [
    {
        "sample_id": "q1",
        "question": "Q-ONE how tall is the tower?",
        "images": ["aa" * 32],
        "answer": "...",
        "sentences": [
            sentence(0, "The tower is 300 m tall.", ["t1"]),
            sentence(1, "It opened in 1889.", ["t2"]),
            sentence(2, "It was painted red.", [], flagged=True),
            sentence(3, "Lovely!", checkable=False),
        ],
    },
    {
        "sample_id": "q2",
        "question": "Q-TWO what is this bird?",
        "images": [],
        "answer": "...",
        "sentences": [sentence(0, "It is a robin.", [], ["image:bb"])],
    },
    {"sample_id": "q3", "question": "Q-THREE unreadable?", "images": [], "answer": "...", "sentences": []},
    {"sample_id": "q4", "question": "Q-FOUR nobody answers?", "images": [], "answer": "...", "sentences": []},
]
DOCS = {
    "t1": {
        "doc_id": "t1",
        "modality": "text",
        "text": "DOC-T1 the tower is 300 m tall.",
        "image": None,
        "title": "Tower",
    },
    "t2": {"doc_id": "t2", "modality": "text", "text": "DOC-T2 opened 1889.", "image": None, "title": ""},
    "t3": {"doc_id": "t3", "modality": "text", "text": "DOC-T3 unrelated.", "image": None, "title": ""},
    "image:bb": {"doc_id": "image:bb", "modality": "image", "text": None, "image": "bb", "title": None},
    "image:cc": {"doc_id": "image:cc", "modality": "image", "text": None, "image": "cc", "title": "A red robin"},
}
FUSED = [
    Hit("t1", "text", 3.0),
    Hit("t2", "text", 2.0),
    Hit("image:bb", "image", 1.0),
    Hit("t3", "text", 0.5),
    Hit("image:cc", "image", 0.4),
]


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
    grd = world.add(
        "grd",
        [  # the paper's Table 11: an explanation, then "Answer: <label>"
            {
                "when_all": ["Statement: The tower is 300 m tall."],
                "answer": "Document 1 gives 300 m.\nAnswer: Fully supported.",
            },
            {
                "when_all": ["Statement: It opened in 1889."],
                "answer": "The year is there,\nthe rest is not.\n**Answer:** partially supported",
            },
            {"when_all": ["Statement: It is a robin.", "could not be read"], "answer": "Answer: fully supported"},
            {"when_all": ["Statement: It is a robin."], "answer": "The image shows a robin, so: fully supported"},
        ],
        default="Nothing backs it.\nAnswer: not supported",
    )
    com = world.add(
        "com",
        [
            {"when_all": ["Statement: The tower is 300 m tall."], "answer": "It says 300 m.\nANSWER: FULLY COMPLETE"},
            {"when_all": ["Statement: It opened in 1889."], "answer": "No date.\nAnswer: not complete"},
        ],
        default="Implied only.\nAnswer: partially complete",
    )
    rel = world.add("rel", [{"when_all": ["Q-ONE"], "answer": "6"}], default="3")
    return {"groundedness": grd, "completeness": com, "relevance": rel}


def answering_model(world):
    return world.add(
        "vlm",
        [
            {"when_all": ["Search query:"], "answer": "tower facts"},  # every question's one search query
            # q1: three sentences, citing [1] (t1), [2] (t2) and nothing
            {"when_all": ["Q-ONE"], "answer": "The tower is 300 m tall [1]. It opened in 1889 [2]. It is pretty."},
            # q2: a citation of a shown document, then one of a document that was not shown (scored, no retry)
            {"when_all": ["Q-TWO"], "answer": "It is a robin [3]. It sings [7]."},
            {"when_all": ["Q-THREE"], "answer": "Maybe [1-2]."},
        ],
        default=None,
    )  # q4: no rule, no default: its answer call fails


def run(world, graders, corpus=None, settings=("multi",), queries=(1,), **cfg):
    model = answering_model(world)
    pool = world.pool
    chosen = {metric: make_grader(name, metric, pool) for metric, name in graders.items()}
    config = RefLVQAEvalConfig.model_validate({"top_k": 3, "doc_chars": 12, **cfg})
    return evaluate_reflvqa(
        QA, DOCS, corpus or StubCorpus(), pool, model, chosen, config, list(settings), list(queries), run_id="e"
    )


def test_answers_citations_and_statuses(world, graders):
    out = run(world, graders)
    answers = {r["sample_id"]: r for r in out.answers.to_pylist()}
    assert [d["doc_id"] for d in answers["q1"]["retrieved"]] == ["t1", "t2", "image:bb"]  # reranked, top 3
    assert (answers["q1"]["setting"], answers["q1"]["n_queries"], answers["q1"]["queries"]) == (
        "multi",
        1,
        ["tower facts"],
    )
    assert [(s["text"], s["citations"]) for s in answers["q1"]["sentences"]] == [
        ("The tower is 300 m tall.", ["t1"]),
        ("It opened in 1889.", ["t2"]),
        ("It is pretty.", []),
    ]
    assert answers["q2"]["status"] == "answered" and answers["q2"]["answer"] == "It is a robin [3]. It sings [7]."
    assert [(s["citations"], s["invalid_citations"]) for s in answers["q2"]["sentences"]] == [
        (["image:bb"], []),
        ([], [7]),
    ]
    assert not any("Q-TWO" in str(m) and "could not be read" in str(m) for m in world.pool.messages["vlm"])
    assert answers["q3"]["status"] == "unreadable" and "citations of documents 1-3" in answers["q3"]["error"]
    assert answers["q4"]["status"] == "failed" and answers["q4"]["sentences"] == []
    assert out.counts["answered"] == 2 and out.counts["failed_calls"] == 1 and out.counts["unreadable"] == 1
    assert out.counts["answers_with_invalid_citations"] == 1
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
    # the evaluator's explanation before its label is kept (004 Tables 11-12); relevance rates alone (Table 13)
    assert grades[("q1", "groundedness", 1)]["reasoning"] == "The year is there,\nthe rest is not."
    assert grades[("q1", "completeness", 0)]["reasoning"] == "It says 300 m."
    assert (
        grades[("q1", "relevance", 0)]["reasoning"] is None and grades[("q1", "groundedness", 2)]["reasoning"] is None
    )
    assert grades[("q2", "groundedness", 0)]["grade"] is None  # unreadable twice: an error, never a guess
    # a sentence citing only a document that was not shown: "no cited documents", 0 without a call
    assert (grades[("q2", "groundedness", 1)]["grade"], grades[("q2", "groundedness", 1)]["evaluator"]) == (
        0.0,
        INVALID_CITATION,
    )
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
    # per answer, then the mean over answers: q1 (1 + 0) / 2, q2 0.5
    assert m["completeness_mean"] == pytest.approx(0.5)
    assert m["completeness_at_1"] == pytest.approx((1 / 2 + 0) / 2) and m["completeness_at_05"] == pytest.approx(
        (1 / 2 + 1) / 2
    )
    assert m["invalid_citations"] == 1
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
        1 / 2.321928
    )  # 1/log2(5)
    assert r[("text", "q1")]["relevant"] == 2 and r[("text", "q2")]["relevant"] == 0  # q2 cites an image only
    assert r[("text+image", "q3")]["relevant"] == 0 and r[("text+image", "q3")]["first_hit"] is None


def test_each_setting_shows_only_the_documents_it_may(world, graders):
    mixed = {
        "tower facts": [
            Hit("t1", "text", 3),
            Hit("image:bb", "image", 2),
            Hit("t2", "text", 1),
            Hit("image:cc", "image", 0.5),
            Hit("t3", "text", 0.1),
        ]
    }
    out = run(world, graders, StubCorpus(mixed), settings=("text", "image", "multi", "two-step"), top_k=2)
    q1 = {r["setting"]: r for r in out.answers.to_pylist() if r["sample_id"] == "q1"}
    assert {s: [d["doc_id"] for d in r["retrieved"]] for s, r in q1.items()} == {
        "text": ["t1", "t2"],
        "image": ["image:bb", "image:cc"],
        "multi": ["t1", "image:bb"],
        "two-step": ["t1", "image:bb"],
    }  # Two-step: MultiRAG's documents, split
    assert [s["step"] for s in q1["two-step"]["steps"]] == ["text", "image"]
    image_only = next(
        m for m in world.pool.messages["vlm"] if "Q-ONE" in str(m) and "[2] Image" in str(m) and "[1] Image" in str(m)
    )
    assert "DOC-T" not in str(image_only)
    per_modality = run(
        world, graders, StubCorpus(mixed), settings=("two-step",), top_k=2, two_step_documents="per_modality"
    )
    [q1] = [r for r in per_modality.answers.to_pylist() if r["sample_id"] == "q1"]
    assert [d["doc_id"] for d in q1["retrieved"]] == ["t1", "t2", "image:bb", "image:cc"]  # text first, then images
    assert [s["step"] for s in q1["steps"]] == ["text", "image"]
    fused_text_only = run(world, graders, settings=("two-step",), top_k=2)  # FUSED's top 2 holds no image
    [q1] = [r for r in fused_text_only.answers.to_pylist() if r["sample_id"] == "q1"]
    assert [s["step"] for s in q1["steps"]] == ["text"] and q1["status"] == "answered"


@pytest.mark.parametrize("duplicates", ["keep", "merge"])
def test_n_queries_show_their_n_x_k_documents_in_query_order(world, graders, duplicates):
    """004 section 4: "Given N x K multimodal documents retrieved" (Table 5's N = 4 rows
    retrieve 20 per question): by default every query's K documents, each with its own
    number, a document two queries found twice; ``duplicates: merge`` shows it once."""
    corpus = StubCorpus(
        {
            "tower height": [Hit("t1", "text", 1), Hit("t2", "text", 1), Hit("t3", "text", 1)],
            "tower age": [Hit("t2", "text", 1), Hit("t3", "text", 1)],
            "tower paint": [Hit("t3", "text", 1), Hit("t1", "text", 1)],
        }
    )
    model = world.add(
        "vlm",
        [
            {
                "when_all": ["Q-ONE", "Search queries:", "could not be read"],
                "answer": '"tower height", "tower age", "tower paint", "tower height"',
            },  # the paper's quoted list
            {"when_all": ["Q-ONE", "Search queries:"], "answer": "1. tower height\n2. tower age\n3. tower paint"},
            {"when_all": ["Search queries:"], "answer": "just one query"},
            {"when_all": ["Q-ONE"], "answer": "Tall [1]. Old [2]. Painted [3]."},
        ],
        default=None,
    )
    chosen = {metric: make_grader("lexical", metric) for metric in METRICS}
    config = RefLVQAEvalConfig.model_validate({"top_k": 2, "duplicates": duplicates})
    out = evaluate_reflvqa(QA[:2], DOCS, corpus, world.pool, model, chosen, config, ["text"], [4], run_id="e")
    q1, q2 = out.answers.to_pylist()
    assert q1["queries"] == ["tower height", "tower age", "tower paint", "tower height"]  # read on the retry
    if duplicates == "keep":  # 4 x 2 as retrieved, query order
        assert [d["doc_id"] for d in q1["retrieved"]] == ["t1", "t2", "t2", "t3", "t3", "t1", "t1", "t2"]
        assert [s["citations"] for s in q1["sentences"]] == [["t1"], ["t2"], ["t2"]]
        prompt = str(next(m for m in world.pool.messages["vlm"] if "Q-ONE" in str(m) and "Answer:" in str(m)))
        assert "[8] " in prompt
    else:  # 4 x 2 found, each once, query order
        assert [d["doc_id"] for d in q1["retrieved"]] == ["t1", "t2", "t3"]
        assert [s["citations"] for s in q1["sentences"]] == [["t1"], ["t2"], ["t3"]]
    [row] = compute_answer_metrics(out.answers, out.grades).to_pylist()
    assert row["retrieved_text"] == (8.0 if duplicates == "keep" else 3.0)  # q2 wrote no queries: not counted
    assert (q2["status"], q2["queries"], q2["retrieved"]) == ("unreadable", [], [])  # one query for four, twice
    assert q2["error"].startswith("search queries: unparsable answer (expected exactly 4 search queries)")
    assert out.counts["queries_unreadable_n4"] == 1
    # the questions for Table 4's ranking, then q1's four queries (q2 wrote none)
    assert [q for q, _ in corpus.searches] == [
        QA[0]["question"],
        QA[1]["question"],
        "tower height",
        "tower age",
        "tower paint",
        "tower height",
    ]


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        ("Doc 1 says so.\nAnswer: fully supported", ("1", "Doc 1 says so.")),
        ("Two claims;\nonly one backed.\n**Answer**: Partially supported.", ("0.5", "Two claims;\nonly one backed.")),
        ("Answer: fully supported", None),  # no explanation before the label
        ("fully supported", None),  # the label alone, as the prompts asked before
        ("Doc 1 says so. Answer: fully supported", None),  # the label line is not a line of its own
        ("Answer: not supported\nOn second thought it is.\nAnswer: fully supported", None),  # two label lines
        ("Doc 1 says so.\nAnswer: fully supported\nHope this helps.", None),  # the label line is not last
        ("Doc 1 says so.\nAnswer: mostly supported", None),  # no label of the set
    ],
)
def test_evaluator_replies_explain_then_answer_read_strictly(reply, label):
    from mmcurate.evaluation.reflvqa.prompts import GROUNDEDNESS_LABELS, GROUNDEDNESS_SYSTEM, reasoned_label

    assert reasoned_label(reply, GROUNDEDNESS_LABELS) == label
    assert "Explain your choice briefly first" in GROUNDEDNESS_SYSTEM and '"Answer: "' in GROUNDEDNESS_SYSTEM


@pytest.mark.parametrize(
    ("reply", "n", "queries"),
    [
        ("tower height", 1, ("tower height",)),
        ('  "Eiffel tower height"  ', 1, ("Eiffel tower height",)),
        ("1. a b\n2) c d\n- e\n* f", 4, ("a b", "c d", "e", "f")),
        ('"a", "b", "c", "d"', 4, ("a", "b", "c", "d")),
        ("Search queries:\n1. a\n2. b", 2, None),  # a preamble is a third line
        ("a\nb", 1, None),
        ("a", 2, None),
        ("", 1, None),
        ("1. ...", 1, None),
    ],
)
def test_queries_are_read_strictly(reply, n, queries):
    assert parse_queries(reply, n) == queries


def two_step_model(world):
    return world.add(
        "vlm",
        [
            {"when_all": ["Search query:"], "answer": "tower facts"},
            {"when_all": ["Combined answer:", "Q-ONE"], "answer": "The tower is tall and red [1, 4]."},
            {"when_all": ["Combined answer:", "Q-TWO"], "answer": "A robin [5]."},  # neither answer cites [5]
            {"when_all": ["Caption:"], "answer": "It is red [1]."},  # the image step: its documents carry captions
            {"when_all": ["DOC-T1"], "answer": "The tower is tall [1]."},
        ],
        default="Nothing [1].",
    )


def test_two_step_combines_both_answers_keeping_their_citations(world):
    model = two_step_model(world)
    chosen = {metric: make_grader("lexical", metric) for metric in METRICS}
    config = RefLVQAEvalConfig.model_validate({"top_k": 5, "doc_chars": 40})
    out = evaluate_reflvqa(QA[:2], DOCS, StubCorpus(), world.pool, model, chosen, config, ["two-step"], [1], run_id="e")
    q1, q2 = out.answers.to_pylist()
    # the shared documents split: text t1, t2, t3 numbered 1-3, then images bb, cc as 4-5
    assert [d["doc_id"] for d in q1["retrieved"]] == ["t1", "t2", "t3", "image:bb", "image:cc"]
    assert [(s["step"], s["answer"]) for s in q1["steps"]] == [
        ("text", "The tower is tall [1]."),
        ("image", "It is red [1]."),
    ]
    assert q1["sentences"] == [
        {"index": 0, "text": "The tower is tall and red.", "citations": ["t1", "image:bb"], "invalid_citations": []}
    ]
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
        "A robin on a branch."
    }
    assert [stage for stage, _ in world.sent[captioner]] == ["evaluate.reflvqa.two-step.n1.caption"] * 2


def test_the_table_has_one_row_per_setting_and_n(world, graders, tmp_path):
    out = run(world, graders, settings=("text", "two-step"), queries=(1, 2))
    text = write_reflvqa_evaluation(out, tmp_path, "t", settings_by_searched(["text", "two-step"], "shared"), [])
    rows = [line.split(" | ")[0] for line in text.splitlines() if line.startswith("| vlm + ")]
    assert rows == [
        "| vlm + TextRAG",
        "| vlm + Two-step MultiRAG",
        "| vlm + TextRAG (N = 2)",
        "| vlm + Two-step MultiRAG (N = 2)",
    ]
    assert "| text documents | TextRAG |" in text and "| text + image (one ranked list) | Two-step MultiRAG |" in text
    assert (tmp_path / "hit_at_k.png").stat().st_size > 1000


def test_grid_options_are_checked():
    assert run_options({}) == {"settings": ["text", "image", "multi", "two-step"], "queries": [1]}
    assert run_options({"settings": ["two-step", "two-step"], "queries": [4, 1]}) == {
        "settings": ["two-step"],
        "queries": [4, 1],
    }
    with pytest.raises(
        EvaluationError, match="unknown RefLVQA setting.* multirag; known: text, image, multi, two-step"
    ):
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
    assert (
        RefLVQAEvalConfig().cutoff is None and str(RefLVQAEvalConfig.model_validate({"cutoff": "mad"}).cutoff) == "mad"
    )
    with pytest.raises(ValueError, match="unknown spec 'madd'"):
        RefLVQAEvalConfig.model_validate({"cutoff": "madd"})
    model = world.add(
        "vlm",
        [
            {"when_all": ["Q-ONE", "Search query:"], "answer": "tall tower"},
            {"when_all": ["Search query:"], "answer": "something"},
        ],
        default="Fine.",
    )
    chosen = {metric: make_grader("lexical", metric) for metric in METRICS}
    config = RefLVQAEvalConfig.model_validate({"top_k": 3, "cutoff": "mad:0.5:1.5:3"})
    out = evaluate_reflvqa(QA, DOCS, ScoredCorpus(), world.pool, model, chosen, config, ["text"], [1], run_id="e")
    kept = {r["sample_id"]: [d["doc_id"] for d in r["retrieved"]] for r in out.answers.to_pylist()}
    # Q-ONE: median .9, MAD .05, theta = max(.5, .825) keeps .95 and .9; the rest: all below .5
    assert kept == {"q1": ["t1", "t2"], "q2": [], "q3": [], "q4": []}
    assert kept_note(out.answers, cutoff, 100) == (
        "cutoff mad:0.5:1.5:3 on the 100 reranked candidates, documents kept per question and query: text N=1: "
        "min 0.00, mean 0.50, max 2.00 (3 of 4 questions kept none)"
    )
    assert kept_note(out.answers, None, 100) is None
    with pytest.raises(MmcurateError, match="the text\\+image ranking fuses text and image rankings"):
        evaluate_reflvqa(QA, DOCS, StubCorpus(), world.pool, model, chosen, config, ["multi"], [1])


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("{query_embedding: mean}", "evaluation.reflvqa.query_embedding: Input should be 'average' or 'text'"),
        (
            "{two_step_documents: both}",
            "evaluation.reflvqa.two_step_documents: Input should be 'shared' or 'per_modality'",
        ),
        ("{query_max_tokens: 0}", "evaluation.reflvqa.query_max_tokens: Input should be greater than or equal to 1"),
        (
            "{caption_max_tokens: 0}",
            "evaluation.reflvqa.caption_max_tokens: Input should be greater than or equal to 1",
        ),
        ("{captioner: ''}", "evaluation.reflvqa.captioner: String should have at least 1 character"),
        ("{captioner: nobody}", "unknown model ['nobody']"),
        ("{captioner: blind}", "evaluation.reflvqa.captioner: model 'blind' does not see images (vision: false)"),
        ("{score_average: mean}", "evaluation.reflvqa.score_average: Input should be 'per_answer' or 'pooled'"),
        ("{duplicates: drop}", "evaluation.reflvqa.duplicates: Input should be 'keep' or 'merge'"),
        ("{subset: some}", "evaluation.reflvqa.subset: Input should be 'verified' or 'all'"),
        ("{self_refine_stop: 10}", "evaluation.reflvqa.self_refine_stop: Input should be less than or equal to 9"),
        (
            "{self_refine_rounds: 0}",
            "evaluation.reflvqa.self_refine_rounds: Input should be greater than or equal to 1",
        ),
    ],
)
def test_the_grids_readings_are_checked_at_load(tmp_path, section, message):
    from mmcurate.core.config import load_config
    from mmcurate.core.errors import ConfigError

    path = tmp_path / "c.yaml"
    path.write_text(
        "models:\n  blind: {backend: scripted, script: r.jsonl}\n  eyes: {backend: scripted, script: "
        f"r.jsonl, vision: true}}\nevaluation:\n  reflvqa: {section}\n"
    )
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
    judge = world.add("judge", [], default="It is backed.\nAnswer: fully supported")
    config = RefLVQAEvalConfig.model_validate({"top_k": 5, "captioner": captioner})

    def grid():
        graders = {
            metric: make_grader(judge if metric == "groundedness" else "lexical", metric, world.pool)
            for metric in METRICS
        }
        return evaluate_reflvqa(
            QA[:2], DOCS, StubCorpus(), world.pool, model, graders, config, ["multi", "two-step"], [1, 2]
        )

    first = grid()
    calls = sum(r["calls"] for r in world.counter.rows())
    again = grid()
    assert calls > 0 and sum(r["calls"] for r in world.counter.rows()) == calls
    assert again.answers.drop_columns(["run_id"]).equals(first.answers.drop_columns(["run_id"]))


def test_questions_excluded_at_the_query_step_are_not_counted_as_answers(world):
    """Issue 31 item 12: N = 4 where every search query stayed unreadable asks for no answer;
    the counts say so apart from the answers, and the note does not blame citations."""
    from mmcurate.evaluation.reflvqa.grid import empty_note

    model = world.add("vlm", [{"when_all": ["Search queries:"], "answer": "only one query"}], default="Fine [1].")
    chosen = {metric: make_grader("lexical", metric) for metric in METRICS}
    out = evaluate_reflvqa(
        QA, DOCS, StubCorpus(), world.pool, model, chosen, RefLVQAEvalConfig(), ["text", "multi"], [4], run_id="e"
    )
    assert out.counts["questions_excluded_at_query_step_n4"] == 4 and out.counts["queries_unreadable_n4"] == 4
    assert (out.counts["answers_requested"], out.counts["answered"], out.counts["unreadable"]) == (0, 0, 0)
    assert empty_note(out) == (
        "no answer was requested: every question was excluded at the query step (N = 4: 4 of "
        "4 questions), so every metric is empty"
    )
    rows = compute_answer_metrics(out.answers, out.grades).to_pylist()
    assert [(r["excluded_at_queries"], r["failed"]) for r in rows] == [(4, 4), (4, 4)]
    # a run whose queries were read but whose answers were not keeps the old note
    model = world.add("vlm2", [{"when_all": ["Search query:"], "answer": "tower"}], default="Maybe [1-2].")
    out = evaluate_reflvqa(QA, DOCS, StubCorpus(), world.pool, model, chosen, RefLVQAEvalConfig(), ["text"], [1])
    assert (out.counts["answers_requested"], out.counts["unreadable"]) == (4, 4)
    assert out.counts["questions_excluded_at_query_step_n1"] == 0
    assert empty_note(out) == "no answer had readable citations: every metric is empty"


def _labels(path, rows):
    import pyarrow as pa

    from mmcurate.core.tables import write_table
    from mmcurate.review.reflvqa.citations import HUMAN_VERIFIED

    table = [
        {
            "item_id": f"{sid}:{i}",
            "sample_id": sid,
            "sentence_index": i,
            "annotators": 2,
            "needs_verification_yes": 2,
            "documents_support_yes": 2 if ok else 0,
            "sentence_grounded_yes": 2 if ok else 0,
            "human_verified": ok,
        }
        for sid, i, ok in rows
    ]
    write_table(pa.Table.from_pylist(table, schema=HUMAN_VERIFIED), path / "human_verified.parquet")
    return path


def test_the_human_verified_subset_is_what_is_evaluated(world, tmp_path):
    """004 section 3.3: the human-verified QA instances are what section 5 evaluates; their
    verified sentences are the completeness statements."""
    from mmcurate.evaluation.reflvqa.subset import choose_pairs

    labels = _labels(tmp_path, [("q1", 1, True), ("q1", 0, False), ("q2", 0, False)])
    rows, note = choose_pairs(QA, labels, "verified")
    assert [r["sample_id"] for r in rows] == ["q1"] and rows[0]["verified_sentences"] == [1]
    assert note.startswith("subset: verified (1 of 4 QA pairs, with 1 human-verified sentence, labels ")
    every, note = choose_pairs(QA, labels, "all")
    assert len(every) == 4 and note == "subset: all (4 QA pairs, every pair of the release)"
    every, note = choose_pairs(QA, None, "verified")
    assert len(every) == 4 and "no imported verification labels" in note
    model = answering_model(world)
    chosen = {metric: make_grader("lexical", metric) for metric in METRICS}
    out = evaluate_reflvqa(rows, DOCS, StubCorpus(), world.pool, model, chosen, RefLVQAEvalConfig(), ["multi"], [1])
    assert {r["sample_id"] for r in out.answers.to_pylist()} == {"q1"}
    assert [g["unit"] for g in out.grades.to_pylist() if g["metric"] == "completeness"] == [1]
    with pytest.raises(MmcurateError, match="labels 1 QA pair this release does not hold \\(first: q9\\)"):
        choose_pairs(QA, _labels(tmp_path, [("q9", 0, True)]), "verified")


def test_the_subset_is_checked_before_any_flow(tmp_path):
    from types import SimpleNamespace

    from mmcurate.evaluation.reflvqa.subset import refuse_unrunnable

    assert run_options({"subset": "all"})["subset"] == "all" and "subset" not in run_options({})
    with pytest.raises(EvaluationError, match="--subset must be one of verified, all, got some"):
        run_options({"subset": "some"})
    settings = SimpleNamespace(evaluation=SimpleNamespace(reflvqa=RefLVQAEvalConfig()))
    with pytest.raises(MmcurateError, match="--subset verified: no verification labels configured"):
        refuse_unrunnable(settings, "m", {"subset": "verified"})
    refuse_unrunnable(settings, "m", {})  # the default falls back to every pair, with a note
    settings.evaluation.reflvqa = RefLVQAEvalConfig(verified_labels=tmp_path / "none.parquet")
    with pytest.raises(MmcurateError, match="none.parquet does not exist"):
        refuse_unrunnable(settings, "m", {})


def grounding_model(world):
    return world.add(
        "vlm",
        [
            {"when_all": ["Search query:"], "answer": "robin"},
            # Self-Refine: round 2's feedback sees the refined answer and stops (7 >= 6)
            {
                "when_all": ["combined score between", "on a branch"],
                "answer": "Better now.\n<total score>7</total score>",
            },
            {"when_all": ["Using this feedback"], "answer": "It is a robin on a branch [2]."},
            {
                "when_all": ["combined score between"],
                "answer": "The image documents go unused.\n<total score>4</total score>",
            },
            {
                "when_all": ["<thinking> and </thinking>", "could not be read"],
                "answer": "<thinking>Document 1 shows a bird.</thinking> It is a robin [1].",
            },
            {"when_all": ["<thinking> and </thinking>"], "answer": "It is a robin [1]."},  # no thinking block: retried
            {"when_all": ["Caption: A red robin"], "answer": "A red robin [2]."},
        ],
        default="It is a robin [1].",
    )


def test_section_6_2_image_grounding_settings(world):
    """004 section 6.2, Table 7: CoT, Self-Refine and captioning on ImageRAG's documents, one
    row each; Self-Refine stops when the combined score reaches 6 (appendix C.1)."""
    model = grounding_model(world)
    chosen = {metric: make_grader("lexical", metric) for metric in METRICS}
    config = RefLVQAEvalConfig.model_validate({"top_k": 5})
    settings = ["image", "image-cot", "image-self-refine", "image-caption"]
    assert run_options({"settings": settings})["settings"] == settings
    out = evaluate_reflvqa(QA[:1], DOCS, StubCorpus(), world.pool, model, chosen, config, settings, [1], run_id="e")
    rows = {r["setting"]: r for r in out.answers.to_pylist()}
    assert all([d["doc_id"] for d in r["retrieved"]] == ["image:bb", "image:cc"] for r in rows.values())
    assert rows["image-cot"]["steps"] == [{"step": "thinking", "answer": "Document 1 shows a bird.", "error": None}]
    assert [(s["text"], s["citations"]) for s in rows["image-cot"]["sentences"]] == [("It is a robin.", ["image:bb"])]
    refine = rows["image-self-refine"]
    assert [s["step"] for s in refine["steps"]] == ["answer 0", "feedback 1", "answer 1", "feedback 2"]
    assert [(s["text"], s["citations"]) for s in refine["sentences"]] == [("It is a robin on a branch.", ["image:cc"])]
    assert out.counts["self_refine_answers_refined"] == 1
    # the first Self-Refine answer is ImageRAG's request: a cache hit, not a second call
    counted = {r["stage"]: r for r in world.counter.rows() if r["model"] == model}
    assert counted["evaluate.reflvqa.image-self-refine.n1"]["calls"] == 0
    assert counted["evaluate.reflvqa.image-self-refine.n1.feedback"]["calls"] == 2
    assert counted["evaluate.reflvqa.image-self-refine.n1.refine"]["calls"] == 1
    assert [(s["text"], s["citations"]) for s in rows["image-caption"]["sentences"]] == [("A red robin.", ["image:cc"])]
    assert [d["caption"] for d in rows["image-caption"]["retrieved"]] == [None, "A red robin"]
    assert out.counts["image_caption_documents_without_caption"] == 1
    text = write_reflvqa_evaluation(out, world.root / "t", "t", settings_by_searched(settings, "shared"), [])
    assert [line.split(" | ")[0] for line in text.splitlines() if line.startswith("| vlm + ")] == [
        "| vlm + ImageRAG",
        "| vlm + ImageRAG + CoT",
        "| vlm + ImageRAG + Self-Refine",
        "| vlm + ImageRAG + Captioning",
    ]


def test_self_refine_gives_up_after_its_rounds(world):
    model = world.add(
        "vlm",
        [
            {"when_all": ["Search query:"], "answer": "robin"},
            {"when_all": ["take two", "Weak again"], "answer": "A robin, take three [1]."},
            {"when_all": ["take two"], "answer": "Weak again.\n<total score>2</total score>"},
            {"when_all": ["Using this feedback"], "answer": "A robin, take two [1]."},
            {"when_all": ["combined score between"], "answer": "Weak.\n<total score>2</total score>"},
        ],
        default="It is a robin [1].",
    )
    chosen = {metric: make_grader("lexical", metric) for metric in METRICS}
    config = RefLVQAEvalConfig.model_validate({"self_refine_rounds": 2})
    out = evaluate_reflvqa(QA[:1], DOCS, StubCorpus(), world.pool, model, chosen, config, ["image-self-refine"], [1])
    [row] = out.answers.to_pylist()
    assert [s["step"] for s in row["steps"]] == ["answer 0", "feedback 1", "answer 1", "feedback 2", "answer 2"]
    assert row["status"] == "answered" and row["sentences"][0]["text"] == "A robin, take three."
    from mmcurate.evaluation.reflvqa.grounding import read_total_score

    assert [
        read_total_score(t)
        for t in (
            "<total score>6</total score>",
            "<total score> 10 </total score>",
            "<total score>3</total score><total score>4</total score>",
            "6",
        )
    ] == [6, None, None, None]


def test_a_failed_self_refine_round_keeps_the_answer_it_was_refining(world):
    """A feedback round that stays unreadable ends the refinement: the last readable answer is
    the answer (it was valid), the step keeps the error and the table counts the round."""
    model = world.add(
        "vlm",
        [
            {"when_all": ["Search query:"], "answer": "robin"},
            {"when_all": ["take two", "combined score between"], "answer": "Fine, I think."},
            {"when_all": ["Using this feedback"], "answer": "A robin, take two [1]."},
            {"when_all": ["combined score between"], "answer": "Weak.\n<total score>2</total score>"},
        ],
        default="It is a robin [1].",
    )
    chosen = {metric: make_grader("lexical", metric) for metric in METRICS}
    out = evaluate_reflvqa(
        QA[:1], DOCS, StubCorpus(), world.pool, model, chosen, RefLVQAEvalConfig(), ["image-self-refine"], [1]
    )
    [row] = out.answers.to_pylist()
    assert [s["step"] for s in row["steps"]] == ["answer 0", "feedback 1", "answer 1", "feedback 2"]
    assert row["steps"][-1]["error"] is not None
    assert (row["status"], row["error"], row["answer"]) == ("answered", None, "A robin, take two [1].")
    assert [(s["text"], s["citations"]) for s in row["sentences"]] == [("A robin, take two.", ["image:bb"])]
    assert (out.counts["self_refine_answers_refined"], out.counts["self_refine_rounds_failed"]) == (1, 1)
    assert {g["metric"] for g in out.grades.to_pylist()} == {"groundedness", "completeness", "relevance"}
