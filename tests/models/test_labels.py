"""The one label parser: strict reading, first-token logprobs, one retry then an error."""

from __future__ import annotations

import math

import pytest

from mmcurate.models.labels import first_token_label, strict_label
from mmcurate.models.requests import ChatResponse


@pytest.mark.parametrize(
    "text, label",
    [
        ("right", "right"),
        (" Right.\n", "right"),
        ("**WRONG**", "wrong"),
        ("'wrong'", "wrong"),
        ("wrong!", "wrong"),
        ("right, because", None),
        ("rightly", None),
        ("", None),
        (None, None),
        ("right wrong", None),
        ("right..", None),
    ],
)
def test_strict_label(text, label):
    assert strict_label(text, ("right", "wrong")) == label


def test_first_token_label_reads_the_labels_probability_mass():
    def response(top):
        return ChatResponse("k", "m", "The answer is wrong.", None, False, 0.1, top_logprobs=top)

    decided = first_token_label(response([{"The": -0.1, " Wrong": -1.0, "right": -3.0}]), ("right", "wrong"))
    share_right = math.exp(-3.0) / (math.exp(-3.0) + math.exp(-1.0))
    assert decided[0] == "wrong" and decided[1] == pytest.approx(share_right)
    assert first_token_label(response([{"The": -0.1, "A": -2.0}]), ("right", "wrong")) is None
    assert first_token_label(response(None), ("right", "wrong")) is None


def test_strict_label_with_spellings():
    spellings = {"a": "CORRECT", "not attempted": "NOT_ATTEMPTED"}
    assert strict_label("**A**", spellings) == "CORRECT"
    assert strict_label("Not   Attempted.", spellings) == "NOT_ATTEMPTED"
    assert strict_label("b)", spellings) is None


def test_first_token_label_sums_case_and_space_variants():
    def response(top):
        return ChatResponse("k", "m", "whatever", None, False, 0.0, top_logprobs=top)

    decided = first_token_label(
        response([{"Yes": math.log(0.5), " yes": math.log(0.1), "No": math.log(0.3)}]), ("yes", "no")
    )
    assert decided[0] == "yes" and decided[1] == pytest.approx(0.6 / 0.9)
    assert first_token_label(response([{"no": math.log(0.7), "yes": math.log(0.2)}]), ("yes", "no"))[0] == "no"
    assert first_token_label(response([{"Maybe": -0.1}]), ("yes", "no")) is None  # falls back to the text
