"""Stage 2: image necessity with scripted inspectors and a scripted evaluator."""

from __future__ import annotations

import pytest

from mmcurate.annotation.reflvqa.necessity import CHECK_INSPECTOR, CHECK_RULE, ImageNecessity
from mmcurate.core.errors import MmcurateError

# question tag -> inspectors whose answer the evaluator grades right
RIGHT = {"q0": [], "q1": ["a"], "q2": ["a", "b"], "q3": [], "q4": []}


def inspector(name: str, special: dict[str, str] | None = None):
    rules = [{"when_all": [f"[{q}]"], "answer": special[q]} for q in (special or {})]
    rules += [{"when_all": [f"[{q}]"], "answer": f"{name}-{q}-right"} for q, who in RIGHT.items() if name in who]
    return rules, f"{name}-guess-wrong", False


EVALUATOR = (
    [
        {"when_all": ["-fixable", "could not be read"], "answer": "wrong"},
        {"when_all": ["-fixable"], "answer": "Well, wrong-ish"},
        {"when_all": ["-verbose"], "answer": "Right, because it matches."},
        {"when_all": ["Candidate answer: ", "-right"], "answer": "**Right.**"},
    ],
    "wrong",
    False,
)


@pytest.fixture
def samples(make_samples):
    return make_samples(
        [(f"p{i}", "c", f"What is this thing [q{i}]?", f"It is thing number {i}.", ["ab" * 32]) for i in range(5)]
    )


def verdicts(result, check):
    return [(d.sample_id, d.model, d.verdict) for d in result.decisions if d.check == check]


def rule_by_tag(result, samples):
    ids = {row["sample_id"]: row["question"].split("[")[1][:2] for row in samples.to_pylist()}
    return {ids[d.sample_id]: d for d in result.decisions if d.check == CHECK_RULE}


def test_zero_one_two_right_inspectors(samples, make_pool, stage_ctx):
    pool = make_pool({"a": inspector("a"), "b": inspector("b"), "c": inspector("c"), "judge": EVALUATOR})
    result = ImageNecessity(["a", "b", "c"], "judge", max_right=1).run(samples, stage_ctx(pool, "r1"))
    rules = rule_by_tag(result, samples)
    assert {t: d.verdict for t, d in rules.items()} == {
        "q0": "keep",
        "q1": "keep",
        "q2": "drop",
        "q3": "keep",
        "q4": "keep",
    }
    assert (rules["q0"].detail["right"], rules["q1"].detail["right"], rules["q2"].detail["right"]) == (0, 1, 2)
    assert rules["q2"].detail["reason"] == "answerable without the image"
    assert result.kept.num_rows == 4 and result.counts["dropped"] == 1
    assert all(d.verdict in ("right", "wrong") for d in result.decisions if d.check == CHECK_INSPECTOR)
    assert result.ledger().num_rows == len(result.decisions)


def test_early_elimination_skips_later_inspectors(samples, make_pool, stage_ctx):
    pool = make_pool({"a": inspector("a"), "b": inspector("b"), "c": inspector("c"), "judge": EVALUATOR})
    result = ImageNecessity(["a", "b", "c"], "judge", max_right=1).run(samples, stage_ctx(pool))
    rules = rule_by_tag(result, samples)
    assert rules["q2"].detail["not_asked"] == ["c"]  # two right after a and b: settled
    assert all(rules[t].detail["not_asked"] == [] for t in ("q0", "q1", "q3", "q4"))
    calls = {row["model"]: row["calls"] for row in pool.counter.rows() if row["stage"] == "necessity"}
    assert calls["a"] == 5 and calls["b"] == 5 and calls["c"] == 4
    # max_right=0: the first right inspector settles q1 and q2 at once
    result0 = ImageNecessity(["a", "b", "c"], "judge", max_right=0).run(samples, stage_ctx(pool))
    rules0 = rule_by_tag(result0, samples)
    assert rules0["q1"].detail["not_asked"] == ["b", "c"] and rules0["q2"].detail["not_asked"] == ["b", "c"]
    assert rules0["q1"].verdict == "drop"


def test_evaluator_strict_parse_retry_and_error(samples, make_pool, stage_ctx):
    # q3: a's answer gets a verbose grade twice -> error; q4: a's answer is fixed by the retry
    a = inspector("a", {"q3": "a-q3-verbose", "q4": "a-q4-fixable"})
    pool = make_pool({"a": a, "b": inspector("b"), "judge": EVALUATOR})
    result = ImageNecessity(["a", "b"], "judge", max_right=0).run(samples, stage_ctx(pool))
    graded = {(d.sample_id, d.model): d for d in result.decisions if d.check == CHECK_INSPECTOR}
    rules = rule_by_tag(result, samples)
    sid = {t: d.sample_id for t, d in rules.items()}
    error = graded[(sid["q3"], "a")]
    assert error.verdict == "error" and "unparsable" in error.detail["error"]
    assert error.detail["grade_raw"] == ["Right, because it matches.", "Right, because it matches."]
    fixed = graded[(sid["q4"], "a")]
    assert fixed.verdict == "wrong" and fixed.detail["grade_raw"] == ["Well, wrong-ish", "wrong"]
    # an error is never a verdict: with max_right=0 the undetermined pair is held out
    assert rules["q3"].verdict == "drop" and rules["q3"].detail["reason"] == "undetermined"
    assert rules["q3"].detail["error"] == 1 and rules["q3"].detail["right"] == 0
    assert rules["q4"].verdict == "keep"


def test_error_tolerated_when_it_cannot_change_the_outcome(samples, make_pool, stage_ctx):
    a = inspector("a", {"q3": "a-q3-verbose"})
    pool = make_pool({"a": a, "b": inspector("b"), "judge": EVALUATOR})
    result = ImageNecessity(["a", "b"], "judge", max_right=1).run(samples, stage_ctx(pool))
    assert rule_by_tag(result, samples)["q3"].verdict == "keep"  # right 0 + error 1 <= 1


def test_failed_inspector_call_is_error(samples, make_pool, stage_ctx):
    silent = ([{"when_all": ["[q1]"], "answer": "a-q1-right"}], None, False)  # no default: fails
    pool = make_pool({"a": silent, "judge": EVALUATOR})
    result = ImageNecessity(["a"], "judge", max_right=0).run(samples, stage_ctx(pool))
    rules = rule_by_tag(result, samples)
    assert rules["q1"].verdict == "drop" and rules["q1"].detail["reason"] == "answerable without the image"
    assert rules["q0"].verdict == "drop" and rules["q0"].detail["reason"] == "undetermined"
    failed = [d for d in result.decisions if d.check == CHECK_INSPECTOR and d.verdict == "error"]
    assert len(failed) == 4 and "inspector call failed" in failed[0].detail["error"]


def test_configuration_errors(samples, make_pool, stage_ctx):
    pool = make_pool({"judge": EVALUATOR})
    with pytest.raises(MmcurateError):
        ImageNecessity([], "judge").run(samples, stage_ctx(pool))
    with pytest.raises(MmcurateError):
        ImageNecessity(["x", "x"], "judge").run(samples, stage_ctx(pool))


def test_lexical_evaluator_grades_by_overlap_with_the_reference_answer():
    from mmcurate.annotation.reflvqa.necessity import lexical_grades

    reference = "This is a Saturn V rocket, the launcher NASA used for the Apollo Moon landings."
    grades = lexical_grades([reference, reference], ["A Saturn V rocket from Apollo.", "A red bicycle."])
    assert [g.label for g in grades] == ["right", "wrong"]
    assert grades[0].score > grades[1].score
