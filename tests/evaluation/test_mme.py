"""MME's score as its evaluation tool computes it (eval_tool/calculation.py): replies read by
its parse_pred_ans, per subtask accuracy + accuracy+ (images with both questions right), the
MME score their sum; a Kestrel run beside its initial answers."""

from __future__ import annotations

import pytest

from mmcurate.evaluation.pope.mme import claim_type, mme_scores, mme_section, read_reply
from mmcurate.evaluation.pope.probes import plain_answers


@pytest.mark.parametrize(
    ("reply", "read"),
    [
        ("Yes", "yes"),
        ("no", "no"),
        ("Yes, there is a train.", "yes"),
        (" yes", "yes"),
        ("No.", "no"),
        ("Not sure", "no"),  # "no" in the first four characters, as calculation.py reads it
        ("There is a train.", "other"),
        ("I think yes", "other"),
        ("", "other"),
    ],
)
def test_mmes_reading_of_a_reply(reply, read) -> None:
    assert read_reply(reply) == read


def row(subtask, image, label, answer, initial=None):
    return {
        "dataset": "mme",
        "split": subtask,
        "image_file": image,
        "label": label,
        "answer": answer,
        "initial": initial,
    }


def test_the_mme_score_by_hand() -> None:
    rows = [  # existence: 3 of 4 right, 1 of 2 images both right: 75 + 50 = 125
        row("existence", "a.jpg", "yes", "yes"),
        row("existence", "a.jpg", "no", "no"),
        row("existence", "b.jpg", "yes", "yes"),
        row("existence", "b.jpg", "no", "yes"),
        # count: an unreadable reply ("other") and a failed call (None) are wrong: 1 of 4, 0 images: 25
        row("count", "c.jpg", "yes", "other"),
        row("count", "c.jpg", "no", "no"),
        row("count", "d.jpg", "yes", None),
        row("count", "d.jpg", "no", "yes"),
        {"dataset": "coco", "split": "random", "image_file": "x.jpg", "label": "yes", "answer": "no"},  # not MME
    ]
    scores = {s["subtask"]: s for s in mme_scores(rows)}
    assert list(scores) == ["existence", "count", "MME score"]
    e = scores["existence"]
    assert (e["questions"], e["images"], e["answer_accuracy"], e["answer_accuracy_plus"], e["answer_score"]) == (
        4,
        2,
        75.0,
        50.0,
        125.0,
    )
    assert scores["count"]["answer_score"] == 25.0
    assert scores["MME score"]["answer_score"] == 150.0 and scores["MME score"]["questions"] == 8
    assert mme_scores(rows[-1:]) == []  # a run without MME probes has no MME section


def test_kestrel_beside_its_initial_answers() -> None:
    rows = [row("position", "a.jpg", "yes", "yes", "Yes"), row("position", "a.jpg", "no", "no", "Yes")]
    scores, text = mme_section(rows, kestrel=True)
    assert (scores[0]["initial_score"], scores[0]["answer_score"]) == (50.0, 200.0)
    table = "\n".join(text)
    assert "## MME-Hallucination (MME score)" in table and "| position |" in table and "+150.00" in table
    assert "Initial: the model's answer before Kestrel's refinement" in table


def test_mme_probes_are_read_by_mmes_rule_and_ask_their_subtasks_claim() -> None:
    class Reply:
        def __init__(self, text):
            self.text, self.error = text, None

    class Client:
        def chat(self, requests, stage):
            return [Reply("I see no train here.")] * len(requests)

    probe = {
        "sample_id": "s",
        "dataset": "mme",
        "split": "existence",
        "question_id": 1,
        "object": "train",
        "image": "sha",
        "image_file": "a.jpg",
        "question": "Is there a train in this image?",
        "label": "no",
    }
    pope = {**probe, "dataset": "coco", "split": "random"}
    mme_row, pope_row = plain_answers([probe, pope], Client())
    assert mme_row["answer"] == "other" and mme_row["grade"] == "INCORRECT"  # MME: neither yes nor no up front
    assert pope_row["answer"] == "no"  # POPE: "no" in the first sentence
    assert claim_type({"dataset": "mme", "split": "color"}) == "colour"
    assert claim_type({"dataset": "coco", "split": "random"}) is None
