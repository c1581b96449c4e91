"""Keywords (domain-dependent) and first-person reflections of the reflective turns."""

from __future__ import annotations

import pytest

from mmcurate.annotation.reflectv.chains import issues_of, turns_of
from mmcurate.annotation.reflectv.reflection import (
    WriteReflections,
    feedback_keyword,
    keyword_parser,
    objects_parser,
    question_keyword,
    rewrite_parser,
    subject_request,
)

CAT = "What animal is in the picture?"
CAT_TURNS = [("a dog", 3, "It is not a dog. Look at the long whiskers and the pointed ears."), ("a cat", 10, "Yes.")]
CHART = "What is the total revenue of Company A in 2021?"
CHART_TURNS = [("$3M", 4, "Too low. Read the bar for 2021 again."), ("$5M", 10, "Right.")]


def _rewriter(lab, **overrides):
    rules = [{"when_all": [feedback], "answer": answer} for feedback, answer in overrides.items()]
    return lab.model(
        "rewriter",
        rules
        + [
            {
                "when_all": [CAT_TURNS[0][2]],
                "answer": "Wait, I think it is not a dog. I should look at the long whiskers and the pointed ears.",
            },
            {"when_all": [CHART_TURNS[0][2]], "answer": "My answer is too low. I should read the bar for 2021 again."},
        ],
    )


def test_heuristic_keywords_depend_on_the_domain(lab) -> None:
    rows = [lab.sample("cat", CAT, "cat"), lab.sample("chart", CHART, "$5M", domain="Chart")]
    stage = WriteReflections("heuristic", _rewriter(lab), caption_order="after_rewrite")
    result = stage.run(lab.chains(rows, [CAT_TURNS, CHART_TURNS]), lab.ctx())
    cat, chart = turns_of(result.kept)
    assert cat[0]["keyword"] == "long whiskers pointed ears"  # from the feedback, without the wrong answer
    assert chart[0]["keyword"] == "total revenue of Company A in 2021"  # from the question
    assert cat[0]["reflection"].startswith("Wait, I think it is not a dog")
    assert cat[1]["keyword"] is None and cat[1]["reflection"] is None  # the last turn reflects on nothing
    assert issues_of(result.kept) == [None, None]
    sources = [d.detail["from"] for d in result.decisions if d.check == "reflection.keyword.v1"]
    assert sources == ["feedback", "question"]


def test_heuristic_keywords_never_hold_the_answer() -> None:
    assert question_keyword("How many bikes are there in 2018?", ["12"]) == "bikes in 2018"
    assert question_keyword("What is written on the sign?", ["open 24 hours"]) == "written on sign"
    assert question_keyword("Which year had the most rain, 2019?", ["2019"]) == "year most rain"
    assert feedback_keyword("Not the tea cup. Look at the crema on the coffee.", "tea", ["coffee"]) == "cup crema"


def test_model_keywords_two_steps_for_general_qa_one_for_charts(lab) -> None:
    keywords = lab.model(
        "kw",
        [
            {"when_all": ["List the physical objects", "could not be used"], "answer": "long whiskers|pointed ears"},
            {"when_all": ["List the physical objects"], "answer": "Objects: whiskers, ears, and so on"},
            {
                "when_all": ["combine a list of objects", "long whiskers|pointed ears"],
                "answer": "long whiskers and pointed ears.",
            },
            {"when_all": ["short phrase naming where", CHART], "answer": "total revenue of Company A in 2021"},
        ],
    )
    rows = [lab.sample("cat", CAT, "cat"), lab.sample("chart", CHART, "$5M", domain="Chart")]
    stage = WriteReflections(keywords, _rewriter(lab))
    result = stage.run(lab.chains(rows, [CAT_TURNS, CHART_TURNS]), lab.ctx())
    cat, chart = turns_of(result.kept)
    assert (
        cat[0]["keyword"] == "long whiskers and pointed ears"
        and chart[0]["keyword"] == "total revenue of Company A in 2021"
    )
    [cat_row] = [
        d
        for d in result.decisions
        if d.check == "reflection.keyword.v1" and d.context_id == "t1" and d.detail["from"] == "feedback"
    ]
    assert cat_row.detail["objects"] == ["long whiskers", "pointed ears"]


def test_a_keyword_that_reveals_the_answer_collapses_the_chain(lab) -> None:
    keywords = lab.model("kw", [{"when_all": ["short phrase naming where"], "answer": "revenue of $5M"}])
    rows = [lab.sample("chart", CHART, "$5M", domain="Chart")]
    stage = WriteReflections(keywords, _rewriter(lab), caption_order="after_rewrite")
    result = stage.run(lab.chains(rows, [CHART_TURNS]), lab.ctx())
    assert issues_of(result.kept) == ["reflection: no usable keyword (turn 1)"]
    [row] = [d for d in result.decisions if d.check == "reflection.keyword.v1"]
    assert row.verdict == "unusable" and row.detail["raw"] == ["revenue of $5M", "revenue of $5M"]
    assert lab.calls("rewriter")["calls"] == 0  # nothing more is asked for a collapsed chain


def test_dense_perception_keywords_never_state_the_ground_truth(lab) -> None:
    """Issue 43 item 2: a Chart keyword is the question's subject phrase (002 Figure 9), never the
    ground truth (Figure 11), by the model and by the heuristic: a model phrase that states the
    answer is refused, retried once, then the chain collapses; the model is not asked to state it."""
    keywords = lab.model(
        "kw",
        [
            {"when_all": ["short phrase naming where", "could not be used"], "answer": "revenue of Company A in 2021"},
            {"when_all": ["short phrase naming where", CHART], "answer": "revenue of Company A in 2021 ($5M)"},
        ],
    )
    rows = [lab.sample("chart", CHART, "$5M", domain="Chart")]
    result = WriteReflections(keywords, _rewriter(lab)).run(lab.chains(rows, [CHART_TURNS]), lab.ctx())
    assert turns_of(result.kept)[0][0]["keyword"] == "revenue of Company A in 2021"
    [row] = [d for d in result.decisions if d.check == "reflection.keyword.v1"]
    assert row.detail["from"] == "question" and row.detail["raw"][0] == "revenue of Company A in 2021 ($5M)"
    system, user = subject_request("k", CHART, ["$5M"]).messages
    assert "never state the answer" in system["content"] and "(do not repeat it): $5M" in user["content"]
    heuristic = WriteReflections("heuristic", _rewriter(lab)).run(lab.chains(rows, [CHART_TURNS]), lab.ctx())
    assert turns_of(heuristic.kept)[0][0]["keyword"] == "total revenue of Company A in 2021"
    assert "keywords_from_ground_truth" not in heuristic.counts


LEAKY = [("a dog", 3, "No, it is a cat. Look at the long whiskers."), ("a cat", 10, "Yes.")]


def test_feedback_that_gives_the_answer_away_keeps_the_chain_by_default(lab) -> None:
    """The teacher's feedback may state the answer: the chain goes on, and the ledger says the
    feedback stated it; the keyword never does, nor the rewrite (issue 43 item 2, Figure 11: "DO
    NOT show the <groundtruth>"): a rewrite that keeps the answer is refused and asked again."""
    rows = [lab.sample("cat", CAT, "cat")]
    rewriter = lab.model(
        "rewriter",
        [
            {
                "when_all": [LEAKY[0][2], "could not be used"],
                "answer": "Wait, I think it is not a dog. I should look at the long whiskers.",
            },
            {"when_all": [LEAKY[0][2]], "answer": "Wait, I think it is a cat. I should look at the long whiskers."},
        ],
    )
    result = WriteReflections("heuristic", rewriter, caption_order="after_rewrite").run(
        lab.chains(rows, [LEAKY]), lab.ctx()
    )
    assert issues_of(result.kept) == [None]
    [turn, _] = turns_of(result.kept)[0]
    assert turn["keyword"] == "long whiskers" and turn["reflection"].startswith("Wait, I think it is not a dog")
    [rewrite] = [d for d in result.decisions if d.check == "reflection.rewrite.v1"]
    assert rewrite.detail["raw"][0].startswith("Wait, I think it is a cat")  # refused: it states the answer
    [leak] = [d for d in result.decisions if d.check == "reflection.leak.v1"]
    assert leak.verdict == "keep" and leak.detail == {"turns": [1], "collapse_revealing_feedback": False}


def test_feedback_that_gives_the_answer_away_collapses_when_asked(lab) -> None:
    rows = [lab.sample("cat", CAT, "cat")]
    stage = WriteReflections("heuristic", _rewriter(lab), collapse_revealing=True)
    result = stage.run(lab.chains(rows, [LEAKY]), lab.ctx())
    assert issues_of(result.kept) == ["reflection: the teacher's feedback gives the answer away (turn 1)"]
    assert lab.calls("rewriter")["calls"] == 0
    assert [d.verdict for d in result.decisions if d.check == "reflection.leak.v1"] == ["collapse"]


def test_unusable_rewrite_is_asked_again_then_collapses(lab) -> None:
    rewriter = _rewriter(lab, **{CAT_TURNS[0][2]: "Score: 3. Feedback: It is not a dog."})
    rows = [lab.sample("cat", CAT, "cat")]
    stage = WriteReflections("heuristic", rewriter, caption_order="after_rewrite")
    result = stage.run(lab.chains(rows, [CAT_TURNS]), lab.ctx())
    assert issues_of(result.kept) == ["reflection: rewrite unusable (turn 1)"]
    assert lab.calls("rewriter")["calls"] == 2
    [row] = [d for d in result.decisions if d.check == "reflection.rewrite.v1"]
    assert row.verdict == "unusable"  # a reply that came: not an error holding the release back


def test_skips_single_turns_and_collapsed_chains(lab) -> None:
    rows = [lab.sample("one", CAT, "cat"), lab.sample("done", CAT, "cat")]
    table = lab.chains(rows, [[("a cat", 10, "Yes.")], CAT_TURNS], [None, "grounding: nothing located"])
    result = WriteReflections("heuristic", _rewriter(lab)).run(table, lab.ctx())
    assert issues_of(result.kept) == [None, "grounding: nothing located"] and lab.counter.rows() == []


@pytest.mark.parametrize(
    "reply, ok",
    [
        ("Wait, I think it is not a dog. I should look at the long whiskers and the pointed ears.", True),
        ("It is not a dog. Look at the long whiskers and the pointed ears.", False),  # not first person
        ("Feedback: I see it is not a dog; the long whiskers and pointed ears matter.", False),  # label kept
        ("Here is the rewritten text: I should look at the long whiskers and pointed ears.", False),  # meta talk
        ("I think I was wrong.", False),  # lost the hints
        ("I think it is a cat: I see long whiskers and pointed ears.", False),  # states the answer
        ("<think>I should look at the long whiskers and the pointed ears.</think>", False),  # markup
    ],
)
def test_rewrite_parser(reply, ok) -> None:
    parse = rewrite_parser(CAT_TURNS[0][2], ["cat"])
    assert (parse(reply) is not None) == ok


def test_keyword_and_object_parsers() -> None:
    parse = keyword_parser(["2019"], min_words=2)
    assert parse("sales bars by year.") == "sales bars by year"
    assert parse("bars") is None and parse("What bar is highest") is None and parse("the 2019 bar") is None
    assert parse("line one\nline two") is None and parse("`sales bars`") is None
    objects = objects_parser(["cat"])
    assert objects("whiskers|pointed ears.") == ["whiskers", "pointed ears"]
    assert objects("whiskers, ears") == ["whiskers, ears"]  # one object: the strict shape, read as written
    assert objects("a cat|ears") is None and objects("a|") is None
