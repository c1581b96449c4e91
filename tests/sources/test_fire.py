"""FIRE adapter: the bundled fixture (teacher replies kept whole), and the layouts FIRE
publishes where a teacher turn carries no ``Score:`` line (see sources/fire.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from mmcurate.sources.fire import dialogue_turns, split_response, teacher_reply
from mmcurate.sources.ingest import IngestResult, ingest

SOURCE = "fire"


def test_dialogues_are_kept_turn_by_turn(result: IngestResult, builder, rows) -> None:
    samples = rows(result)
    assert result.samples == 3
    for number, case in enumerate(builder.cases_of("fire")):
        sample = samples[f"fire_test_{number}"]
        assert sample["question"] == case.question and sample["answers"] == [case.truth]
        assert sample["meta"]["domain"] == "General QA" and sample["meta"]["scores_from"] == "reply"
        assert sample["meta"]["truth_from"] == "groundtruth"
        assert sample["meta"]["dialogue"] == [
            {"answer": t.answer, "score": t.score, "feedback": t.feedback} for t in case.turns
        ]


def test_quarantine_reasons(result: IngestResult, rejected) -> None:
    assert rejected(result) == {
        "FIRE-test.json:3": "malformed record: no ground truth (raw.groundtruth.value or groundtruth), and the "
        "teacher's final turn does not accept the final answer (Score: 10)",
        "FIRE-test.json:4": "malformed record: teacher reply scores 12, outside 0..10: 'Score: 12\\nFeedback: look again.'",
    }


def test_teacher_replies_are_read_as_fire_reads_them() -> None:
    assert teacher_reply("Score: 7\nFeedback: Look at the ears.") == (7, "Look at the ears.")
    assert teacher_reply("Score: 6.\nFeedback: Count again.") == (6, "Count again.")
    assert teacher_reply("Score: 10. Great!\nFeedback: Correct.") == (10, "Correct.")
    # the student view keeps only the text after "Feedback:" (FIRE's get_feedback): no score
    assert teacher_reply("Look at the roof again.") == (None, "Look at the roof again.")
    assert teacher_reply("Feedback: look again.") == (None, "look again.")
    with pytest.raises(ValueError, match="outside 0..10"):
        teacher_reply("Score: 12\nFeedback: too high")


def test_conversations_must_alternate() -> None:
    good = [
        {"from": "human", "value": "<image>\nWhat?"},
        {"from": "gpt", "value": "a"},
        {"from": "human", "value": "Score: 10\nFeedback: ok"},
    ]
    assert dialogue_turns(good) == ("What?", [{"answer": "a", "score": 10, "feedback": "ok"}], "reply")
    with pytest.raises(ValueError, match="alternate"):
        dialogue_turns(good + [{"from": "human", "value": "more"}])
    with pytest.raises(ValueError, match="alternate"):
        dialogue_turns([good[0], good[2], good[1]])
    with pytest.raises(ValueError, match="non-empty"):
        dialogue_turns([good[0], {"from": "gpt", "value": " "}, good[2]])
    with pytest.raises(ValueError, match="student response nor teacher feedback"):
        dialogue_turns([{"role": "student", "type": "response", "value": "a"}, {"role": "judge", "value": "b"}])


def _ingest(tmp_path: Path, items: list[dict]) -> tuple[dict[str, dict], dict[str, str]]:
    from PIL import Image

    root = tmp_path / "fire"
    (root / "images").mkdir(parents=True)
    Image.new("RGB", (8, 8), (10, 200, 10)).save(root / "images" / "a.jpg")
    (root / "FIRE-train-100K.json").write_text(json.dumps(items))
    result = ingest("fire", root, tmp_path / "out")
    samples = {
        r["source_id"]: {**r, "meta": json.loads(r["meta"])} for r in pq.read_table(result.samples_path).to_pylist()
    }
    return samples, {r["locator"]: r["reason"] for r in pq.read_table(result.quarantine_path).to_pylist()}


STUDENT_VIEW = [
    {"from": "human", "value": "<image>\nHow many boats?"},
    {"from": "gpt", "value": "Two boats."},
    {"from": "human", "value": "Count the small ones near the pier too."},
    {"from": "gpt", "value": "Three boats."},
]


def test_student_view_without_scores_is_ingested_unscored_or_scored_from_the_scores_list(tmp_path: Path) -> None:
    raw = {"question": {"value": "How many boats?"}, "groundtruth": {"value": "3"}}
    items = [
        {"id": "u", "image": "a.jpg", "conversations": STUDENT_VIEW, "raw": raw},
        {"id": "s", "image": "a.jpg", "conversations": STUDENT_VIEW, "raw": raw, "scores": [4, 10]},
        {"id": "short", "image": "a.jpg", "conversations": STUDENT_VIEW, "raw": raw, "scores": [10]},
    ]
    samples, quarantine = _ingest(tmp_path, items)
    unscored = samples["u"]["meta"]
    assert unscored["scores_from"] == "none"
    assert unscored["dialogue"] == [
        {"answer": "Two boats.", "score": None, "feedback": "Count the small ones near the pier too."},
        {"answer": "Three boats.", "score": None, "feedback": ""},
    ]
    assert samples["s"]["meta"]["scores_from"] == "scores"
    assert [t["score"] for t in samples["s"]["meta"]["dialogue"]] == [4, 10]
    assert quarantine["FIRE-train-100K.json:2"].startswith(
        "malformed record: scores must list one score in 0..10 per student answer (2)"
    )


def test_hub_rows_with_role_and_type_turns(tmp_path: Path) -> None:
    conversations = [
        {"role": "student", "type": "response", "value": "Thought: boats.\nAnswer: Two."},
        {"role": "teacher", "type": "feedback", "value": "Score: 6.\nFeedback: Count again."},
        {"role": "student", "type": "response", "value": "Thought: a third one.\nAnswer: Three."},
        {"role": "teacher", "type": "feedback", "value": "Score: 10\nFeedback: Correct."},
    ]
    row = {
        "image": "a.jpg",
        "source": "coco",
        "question": {"value": "<image>\nHow many boats?"},
        "groundtruth": {"value": "3"},
        "conversations": conversations,
    }
    clash = {**row, "scores": [5, 10]}
    samples, quarantine = _ingest(tmp_path, [row, clash])
    sample = samples["FIRE-train-100K:0"]  # no id: the row's index in its file
    assert sample["question"] == "How many boats?" and sample["answers"] == ["3"]
    assert sample["meta"]["fire_source"] == "coco" and sample["meta"]["scores_from"] == "reply"
    assert [(t["score"], t["feedback"]) for t in sample["meta"]["dialogue"]] == [(6, "Count again."), (10, "Correct.")]
    assert quarantine == {"FIRE-train-100K.json:1": "malformed record: scores[0] = 5 contradicts the reply's Score: 6"}


def test_hub_rows_without_ground_truth_take_the_accepted_final_answer(root: Path, tmp_path: Path, builder) -> None:
    # the hub's role/type rows carry no ground-truth field: the answer the teacher's final turn
    # accepts with Score: 10 is the ground truth (meta.truth_from says so); a row whose teacher
    # never accepts one has none and is quarantined
    result = ingest(SOURCE, root / "hub_rows", tmp_path / "out")
    samples = {
        r["source_id"]: {**r, "meta": json.loads(r["meta"])} for r in pq.read_table(result.samples_path).to_pylist()
    }
    case = builder.cases_of("fire")[0]
    row = samples["FIRE-test:0"]
    assert row["answers"] == [case.turns[-1].answer] and row["meta"]["truth_from"] == "accepted_final_answer"
    # "Thought: ...\nAnswer: ..." keeps the text after "Answer:" as the answer, the rest as the thought
    assert [(t["answer"], t["thought"], t["score"]) for t in row["meta"]["dialogue"]] == [
        (t.answer, "I look at the whole picture.", t.score) for t in case.turns
    ]
    quarantine = {r["locator"]: r["reason"] for r in pq.read_table(result.quarantine_path).to_pylist()}
    assert list(quarantine.values()) == [
        "malformed record: no ground truth (raw.groundtruth.value or groundtruth), "
        "and the teacher's final turn does not accept the final answer (Score: 10)"
    ]


def test_thought_and_answer_are_split() -> None:
    assert split_response("Thought: two masts.\nAnswer: A sailboat.\n\n") == ("two masts.", "A sailboat.")
    assert split_response("A sailboat.") == (None, "A sailboat.")
    assert split_response("Answer: 3") == (None, "3")
    with pytest.raises(ValueError, match="nothing after 'Answer:'"):
        dialogue_turns([{"role": "student", "type": "response", "value": "Thought: hmm.\nAnswer: "}])
