"""Dialogue construction: student and teacher turn after turn until 10 or the turn limit."""

from __future__ import annotations

import pytest

from mmcurate.annotation.reflectv.chains import turns_of
from mmcurate.annotation.reflectv.dialogue import BuildDialogues, parse_teacher
from mmcurate.core.errors import MmcurateError

Q = "What animal is in the picture?"


def _student(lab):
    return lab.model(
        "student",
        [
            {"when_all": [Q, "Look at the whiskers"], "answer": "a cat"},
            {"when_all": [Q, "Not a horse"], "answer": "a dog"},
            {"when_all": [Q], "answer": "a horse"},
        ],
        vision=True,
    )


def _teacher(lab, final: str = "Score: 10\nFeedback: Correct."):
    return lab.model(
        "teacher",
        [
            {"when_all": [Q, "Student answer: a cat"], "answer": final},
            {"when_all": [Q, "Student answer: a dog"], "answer": "Score: 5\nFeedback: Look at the whiskers."},
            {"when_all": [Q, "Student answer: a horse"], "answer": "**Score:** 2/10\nFeedback: Not a horse."},
        ],
        vision=True,
    )


def test_turns_until_the_teacher_gives_ten(lab) -> None:
    student, teacher = _student(lab), _teacher(lab)
    result = BuildDialogues(student, teacher, max_turns=5).run(lab.table([lab.sample("a", Q, "cat")]), lab.ctx())
    [turns] = turns_of(result.kept)
    assert [(t["answer"], t["score"], t["feedback"]) for t in turns] == [
        ("a horse", 2, "Not a horse."),
        ("a dog", 5, "Look at the whiskers."),
        ("a cat", 10, "Correct."),
    ]
    assert result.kept.column("origin").to_pylist() == ["built"]
    assert lab.calls("student")["calls"] == 3 and lab.calls("teacher")["calls"] == 3  # stops at 10
    verdicts = [(d.context_id, d.verdict) for d in result.decisions if d.check == "dialogue.turn.v1"]
    assert verdicts == [("t1", "2"), ("t2", "5"), ("t3", "10")]


def test_turn_limit_stops_below_ten(lab) -> None:
    student, teacher = _student(lab), _teacher(lab)
    result = BuildDialogues(student, teacher, max_turns=2).run(lab.table([lab.sample("a", Q, "cat")]), lab.ctx())
    assert [t["score"] for t in turns_of(result.kept)[0]] == [2, 5]


def test_unreadable_teacher_is_asked_again_then_an_error(lab) -> None:
    student = _student(lab)
    teacher = lab.model(
        "teacher",
        [
            {"when_all": [Q, "Student answer: a dog"], "answer": "Score: eleven\nFeedback: ?"},  # and on its retry
            {"when_all": ["could not be read"], "answer": "Score: 3\nFeedback: Not a horse."},  # the first retry works
            {"when_all": [Q], "answer": "Three out of ten, try again"},
        ],
        vision=True,
    )
    result = BuildDialogues(student, teacher, max_turns=3).run(lab.table([lab.sample("a", Q, "cat")]), lab.ctx())
    assert result.kept.num_rows == 0 and result.counts["dropped"] == 1
    turn_rows = [d for d in result.decisions if d.check == "dialogue.turn.v1"]
    assert [(d.context_id, d.verdict) for d in turn_rows] == [("t1", "3"), ("t2", "error")]
    assert "unparsable answer" in turn_rows[1].detail["error"] and len(turn_rows[1].detail["raw"]) == 2
    [sample] = [d for d in result.decisions if d.check == "dialogue.sample.v1"]
    assert sample.verdict == "drop" and sample.detail["reason"] == "undetermined: teacher reply unreadable at turn 2"


def test_failed_student_call_drops_the_sample(lab) -> None:
    student = lab.model("student", [], default=None, vision=True)
    teacher = _teacher(lab)
    result = BuildDialogues(student, teacher).run(lab.table([lab.sample("a", Q, "cat")]), lab.ctx())
    assert result.kept.num_rows == 0
    assert "student call failed at turn 1" in result.decisions[-1].detail["reason"]


def test_ingested_dialogue_costs_no_call(lab) -> None:
    dialogue = [
        {"answer": "a dog", "score": 4, "feedback": "No."},
        {"answer": "a cat", "score": 10, "feedback": "Yes."},
    ]
    row = lab.sample("f", Q, "cat", dialogue=dialogue)
    result = BuildDialogues(None, None).run(lab.table([row]), lab.ctx())
    assert [t["answer"] for t in turns_of(result.kept)[0]] == ["a dog", "a cat"]
    assert result.kept.column("origin").to_pylist() == ["ingested"] and lab.counter.rows() == []
    bad = lab.sample("g", Q, "cat", dialogue=[{"answer": "x", "score": 12, "feedback": ""}])
    result = BuildDialogues(None, None).run(lab.table([bad]), lab.ctx())
    assert result.kept.num_rows == 0 and "ingested dialogue unusable" in result.decisions[-1].detail["reason"]


def test_ingested_dialogue_without_scores_is_dropped_as_unscored(lab) -> None:
    dialogue = [
        {"answer": "a dog", "score": None, "feedback": "Look at the whiskers."},
        {"answer": "a cat", "score": None, "feedback": ""},
    ]
    result = BuildDialogues(None, None).run(lab.table([lab.sample("f", Q, "cat", dialogue=dialogue)]), lab.ctx())
    assert result.kept.num_rows == 0 and result.counts["unscored"] == 1
    assert result.decisions[-1].detail["reason"] == (
        "unscored: no teacher score for turns 1, 2 (the trajectory filter needs one per turn)"
    )


def test_samples_to_build_need_both_models(lab) -> None:
    with pytest.raises(MmcurateError, match="student and reflectv.teacher must name models"):
        BuildDialogues(None, None).run(lab.table([lab.sample("a", Q, "cat")]), lab.ctx())


def test_rerun_is_served_from_the_cache(lab) -> None:
    student, teacher = _student(lab), _teacher(lab)
    samples = lab.table([lab.sample("a", Q, "cat")])
    first = BuildDialogues(student, teacher).run(samples, lab.ctx())
    before = lab.calls("student")["calls"] + lab.calls("teacher")["calls"]
    again = BuildDialogues(student, teacher).run(samples, lab.ctx())
    assert lab.calls("student")["calls"] + lab.calls("teacher")["calls"] == before
    assert turns_of(again.kept) == turns_of(first.kept)


@pytest.mark.parametrize(
    "reply, expected",
    [
        ("Score: 7\nFeedback: Look at the ears.", (7, "Look at the ears.")),
        ("score: 0\n\nfeedback: Wrong animal.", (0, "Wrong animal.")),
        ("**Score:** 10/10\n**Feedback:** Correct.", (10, "Correct.")),
        ("Score: 11\nFeedback: too high", None),
        ("Score: 7", None),
        ("I would give it a 7. Feedback: ears", None),
        ("Feedback: ears\nScore: 7", None),
    ],
)
def test_teacher_replies_are_read_strictly(reply, expected) -> None:
    assert parse_teacher(reply) == expected
