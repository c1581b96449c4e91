"""InfoSeek's numeric answers are graded by InfoSeek's own rule (issue 43 item 5): its evaluation
script (``infoseek_eval.py`` of github.com/edchengg/infoseek_eval, linked from the dataset's page
open-vision-language.github.io/infoseek) reads the answer's first number, or its first two as a
range when the first is not above the second ("9-10" is two numbers), and scores a number by
whether it lies in the first gold range (inclusive), a range by whether it lies inside the gold
range or overlaps it with an intersection over union of at least 0.5. Every expected grade below
is what that script gives (``metric_numerical_range(process_numerical_answer(answer), gold)``);
the old rule (any number anywhere in any range) disagreed wherever a comment says so."""

from __future__ import annotations

import pytest

from mmcurate.judging import prejudge as rule
from mmcurate.judging.grades import Grade, JudgeItem

HEIGHT = (99.54, 121.66)  # InfoSeek's answer_eval range of 110.6 (the fixtures' record)
C, X = Grade.CORRECT, Grade.INCORRECT


@pytest.mark.parametrize(
    "answer, ranges, grade",
    [
        ("About 110 metres", [HEIGHT], C),  # one number inside the range
        ("It is 1,250 metres tall", [(1100.0, 1300.0)], C),  # thousands commas are dropped
        ("-40 degrees", [(-45.0, -35.0)], C),  # a leading sign is part of the number
        ("Roughly 3.5 km", [(1100.0, 1300.0)], X),
        ("1e3 kg", [(900.0, 1100.0)], C),  # an exponent is part of the number
        ("Between 100 and 120 metres", [HEIGHT], C),  # a range inside the gold range
        ("95 to 120", [HEIGHT], C),  # a range overlapping it, IoU 0.77
        ("110 or 130", [HEIGHT], X),  # IoU 0.38 (old rule: 110 is inside: CORRECT)
        ("It has 9-10 floors", [(9.5, 10.5)], X),  # 9-10 is the range [9, 10], IoU 0.33 (old: CORRECT)
        ("It has 10-11 floors", [(9.5, 10.5)], X),  # [10, 11], IoU 0.33
        ("It has 10-10.5 floors", [(9.5, 10.5)], C),  # [10, 10.5] lies inside
        ("Built in 1889, it is 330 metres tall", [(300.0, 360.0)], X),  # 1889 > 330: the first number (old: CORRECT)
        ("330 metres, finished in 1889", [(300.0, 360.0)], X),  # the range [330, 1889] (old: CORRECT)
        ("between 5 and 3", [(4.5, 5.5)], C),  # 5 > 3: the first number, 5
        ("110", [(0.0, 1.0), HEIGHT], X),  # only the first gold range counts (old: CORRECT)
        ("7", [(7.0, 7.0)], C),  # a gold range of one point
    ],
)
def test_numeric_answers_follow_infoseeks_rule(answer, ranges, grade):
    item = JudgeItem("k", "How tall is it?", ["110.6"], answer, ranges)
    assert rule.prejudge(item) == (grade, "prejudge.numeric")


@pytest.mark.parametrize(
    "answer, read",
    [
        ("9-10", (9.0, 10.0)),
        ("from 12 to 15, or 20", (12.0, 15.0)),  # the first two numbers only
        ("15 (or 12)", 15.0),  # the first is above the second: the first alone
        ("1,234,567 people", 1234567.0),
        ("version 1.2.3", (1.2, 3.0)),  # a number has one decimal point
        ("COVID-19", -19.0),  # a hyphen after a letter is a sign, as in the script
        ("no digits here", None),
    ],
)
def test_the_answer_is_read_as_infoseeks_script_reads_it(answer, read):
    assert rule.numeric_answer(answer) == read


def test_a_range_scores_by_intersection_over_union():
    assert rule.numeric_correct((0.0, 10.0), (0.0, 5.0))  # IoU exactly 0.5
    assert not rule.numeric_correct((0.0, 10.0), (0.0, 4.9))
    assert rule.numeric_correct(5.0, (5.0, 5.0))


def test_an_answer_without_digits_goes_to_the_judge():
    assert rule.prejudge(JudgeItem("k", "How tall is it?", ["110.6"], "about a hundred metres", [HEIGHT])) is None
