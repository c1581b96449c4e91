"""Stage 3: sentences and fact-checkability, strict yes/no parse with one retry."""
from __future__ import annotations

import pytest

from mmcurate.annotation.factcheck import CHECK_SAMPLE, CHECK_SENTENCE, SENTENCE, fact_checkable
from mmcurate.core.errors import MmcurateError

CHECKER = (
    [
        {"when_all": ["Sentence: The Eiffel"], "answer": "Yes."},
        {"when_all": ["Sentence: It was built"], "answer": "YES"},
        {"when_all": ["Sentence: I love"], "answer": "no"},
        {"when_all": ["Sentence: Maybe", "could not be read"], "answer": "no"},
        {"when_all": ["Sentence: Maybe"], "answer": "Probably not, it is a guess."},
        {"when_all": ["Sentence: Weird"], "answer": "hmm"},
    ],
    None,
    False,
)


def split(text):
    return [s.strip() + "." for s in text.split(".") if s.strip()]


@pytest.fixture
def samples(make_samples):
    return make_samples([
        ("p0", "c0", "What tower is this?", "The Eiffel Tower is in Paris. I love it. Maybe it is tall.", []),
        ("p1", "c0", "What is this?", "It was built in 1889. Weird question.", []),
        ("p2", "c0", "Empty?", "   ", []),
    ])


def test_labels_parse_retry_and_error(samples, make_pool):
    pool = make_pool({"fc": CHECKER})
    result = fact_checkable(samples, pool, "fc", run_id="r", splitter=split)
    annotated = result.extra["all"]
    assert annotated.schema.field("sentences").type == __import__("pyarrow").list_(SENTENCE)
    sentences = annotated["sentences"].to_pylist()
    assert [(s["index"], s["fact_checkable"]) for s in sentences[0]] == [(0, True), (1, False), (2, False)]
    assert sentences[0][2]["text"] == "Maybe it is tall."
    assert [s["fact_checkable"] for s in sentences[1]] == [True, None]  # "hmm" twice: error
    assert sentences[2] == []
    rows = [(d.context_id, d.verdict) for d in result.decisions if d.check == CHECK_SENTENCE]
    assert rows == [("s0", "yes"), ("s1", "no"), ("s2", "no"), ("s0", "yes"), ("s1", "error")]
    retried = [d for d in result.decisions if d.check == CHECK_SENTENCE][2]
    assert retried.detail["raw"] == ["Probably not, it is a guess.", "no"]
    samples_verdicts = [(d.verdict, d.detail["reason"]) for d in result.decisions if d.check == CHECK_SAMPLE]
    assert samples_verdicts == [("keep", "labelled"), ("drop", "undetermined"), ("drop", "answer has no sentence")]
    assert result.kept.num_rows == 1
    assert result.counts == {"input": 3, "kept": 1, "dropped": 2, "sentences": 5, "fact_checkable": 2, "errors": 1}
    assert all(d.model == "fc" for d in result.decisions)


def test_model_is_required(samples, make_pool):
    with pytest.raises(MmcurateError, match="needs a model"):
        fact_checkable(samples, make_pool({}), None)


def test_default_splitter_is_punkt(make_samples, make_pool):
    pytest.importorskip("punkt")
    samples = make_samples([("p0", "c0", "Q?", "The Eiffel Tower is in Paris. It was built in 1889 by Mr. Eiffel's firm.", [])])
    result = fact_checkable(samples, make_pool({"fc": CHECKER}), "fc")
    texts = [s["text"] for s in result.kept["sentences"].to_pylist()[0]]
    assert texts == ["The Eiffel Tower is in Paris.", "It was built in 1889 by Mr. Eiffel's firm."]


@pytest.mark.parametrize("sentence, checkable", [
    ("She was the first woman to pilot the Space Shuttle, on STS-63 in 1995.", True),
    ("The Saturn V stood 110 metres tall on the launch pad.", True),
    ("I really love how this picture turned out for me.", False),   # about the writer
    ("Is that the Eiffel Tower in the background there?", False),   # a question
    ("Nice shot.", False),                                          # too short
    ("it looks pretty old and probably worth keeping around", False),  # names nothing
])
def test_heuristic_stand_in(sentence, checkable):
    from mmcurate.annotation.factcheck import heuristic_label

    assert heuristic_label(sentence).label == ("yes" if checkable else "no")


def test_heuristic_needs_no_model(samples, make_pool):
    result = fact_checkable(samples, make_pool({}), "heuristic", run_id="r", splitter=split)
    assert result.counts["errors"] == 0
    assert [s["fact_checkable"] for s in result.extra["all"]["sentences"].to_pylist()[1]] == [False, False]
