"""Stage 3: sentences and fact-checkability, strict yes/no parse with one retry."""

from __future__ import annotations

import pyarrow as pa
import pytest

from mmcurate.annotation.reflvqa.factcheck import CHECK_SAMPLE, CHECK_SENTENCE, FactCheckable, heuristic_label
from mmcurate.core.errors import MmcurateError
from mmcurate.core.schema import SENTENCE

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
    return make_samples(
        [
            ("p0", "c0", "What tower is this?", "The Eiffel Tower is in Paris. I love it. Maybe it is tall.", []),
            ("p1", "c0", "What is this?", "It was built in 1889. Weird question.", []),
            ("p2", "c0", "Empty?", "   ", []),
        ]
    )


def test_labels_parse_retry_and_error(samples, make_pool, stage_ctx):
    pool = make_pool({"fc": CHECKER})
    result = FactCheckable("fc", splitter=split).run(samples, stage_ctx(pool))
    assert result.kept.schema.field("sentences").type == pa.list_(SENTENCE)
    sentences = result.kept["sentences"].to_pylist()  # only p0 is kept
    assert [(s["index"], s["fact_checkable"]) for s in sentences[0]] == [(0, True), (1, False), (2, False)]
    assert sentences[0][2]["text"] == "Maybe it is tall."
    assert all(s["text_citations"] == [] and not s["flagged"] for s in sentences[0])
    rows = [(d.context_id, d.verdict) for d in result.decisions if d.check == CHECK_SENTENCE]
    assert rows == [("s0", "yes"), ("s1", "no"), ("s2", "no"), ("s0", "yes"), ("s1", "error")]  # "hmm" twice
    retried = [d for d in result.decisions if d.check == CHECK_SENTENCE][2]
    assert retried.detail["raw"] == ["Probably not, it is a guess.", "no"]
    samples_verdicts = [(d.verdict, d.detail["reason"]) for d in result.decisions if d.check == CHECK_SAMPLE]
    assert samples_verdicts == [("keep", "labelled"), ("drop", "undetermined"), ("drop", "answer has no sentence")]
    assert result.kept.num_rows == 1
    assert result.counts == {"input": 3, "kept": 1, "dropped": 2, "sentences": 5, "fact_checkable": 2, "errors": 1}
    assert all(d.model == "fc" for d in result.decisions)


def test_labeller_is_required():
    with pytest.raises(MmcurateError, match="needs a labeller"):
        FactCheckable(None)


def test_default_splitter_is_punkt(make_samples, make_pool, stage_ctx):
    samples = make_samples(
        [("p0", "c0", "Q?", "The Eiffel Tower is in Paris. It was built in 1889 by Mr. Eiffel's firm.", [])]
    )
    result = FactCheckable("fc").run(samples, stage_ctx(make_pool({"fc": CHECKER})))
    texts = [s["text"] for s in result.kept["sentences"].to_pylist()[0]]
    assert texts == ["The Eiffel Tower is in Paris.", "It was built in 1889 by Mr. Eiffel's firm."]


@pytest.mark.parametrize(
    "sentence, checkable",
    [
        ("She was the first woman to pilot the Space Shuttle, on STS-63 in 1995.", True),
        ("The Saturn V stood 110 metres tall on the launch pad.", True),
        ("I really love how this picture turned out for me.", False),  # about the writer
        ("Is that the Eiffel Tower in the background there?", False),  # a question
        ("Nice shot.", False),  # too short
        ("it looks pretty old and probably worth keeping around", False),  # names nothing
    ],
)
def test_heuristic_stand_in(sentence, checkable):
    assert heuristic_label(sentence).label == ("yes" if checkable else "no")


def test_heuristic_needs_no_model(samples, stage_ctx):
    result = FactCheckable("heuristic", splitter=split).run(samples, stage_ctx())
    assert result.counts["errors"] == 0
    p1 = samples["sample_id"][1].as_py()
    assert [d.verdict for d in result.decisions if d.sample_id == p1 and d.check == CHECK_SENTENCE] == ["no", "no"]
