"""FIRE adapter over its bundled fixture: dialogues with the teacher's Score/Feedback replies."""
from __future__ import annotations

import pytest

from mmcurate.sources.fire import dialogue_turns, teacher_reply
from mmcurate.sources.ingest import IngestResult

SOURCE = "fire"


def test_dialogues_are_kept_turn_by_turn(result: IngestResult, builder, rows) -> None:
    samples = rows(result)
    assert result.samples == 3
    for number, case in enumerate(builder.cases_of("fire")):
        sample = samples[f"fire_test_{number}"]
        assert sample["question"] == case.question and sample["answers"] == [case.truth]
        assert sample["meta"]["domain"] == "General QA"
        assert sample["meta"]["dialogue"] == [{"answer": t.answer, "score": t.score, "feedback": t.feedback}
                                              for t in case.turns]


def test_quarantine_reasons(result: IngestResult, rejected) -> None:
    assert rejected(result) == {
        "FIRE-test.json:3": "malformed record: no ground truth (raw.groundtruth.value)",
        "FIRE-test.json:4": "malformed record: teacher turn without a readable 'Score: N' line: 'Feedback: look again.'",
    }


def test_teacher_replies_are_read_as_fire_reads_them() -> None:
    assert teacher_reply("Score: 7\nFeedback: Look at the ears.") == (7, "Look at the ears.")
    assert teacher_reply("Score: 10. Great!\nFeedback: Correct.") == (10, "Correct.")
    with pytest.raises(ValueError, match="readable"):
        teacher_reply("Score: 12\nFeedback: too high")


def test_conversations_must_alternate_and_end_with_the_teacher() -> None:
    good = [{"from": "human", "value": "<image>\nWhat?"}, {"from": "gpt", "value": "a"},
            {"from": "human", "value": "Score: 10\nFeedback: ok"}]
    assert dialogue_turns(good) == ("What?", [{"answer": "a", "score": 10, "feedback": "ok"}])
    with pytest.raises(ValueError, match="alternate"):
        dialogue_turns(good + [{"from": "gpt", "value": "b"}])
    with pytest.raises(ValueError, match="alternate"):
        dialogue_turns([good[0], good[2], good[1]])
    with pytest.raises(ValueError, match="non-empty"):
        dialogue_turns([good[0], {"from": "gpt", "value": " "}, good[2]])
