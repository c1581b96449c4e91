"""Judge: strict reply parsing, deterministic pre-judge, lexical rule, LLM judge with retry."""

from __future__ import annotations

import json

import pytest

from mmcurate.core.config import JudgeSpec, ModelSpec, Settings
from mmcurate.judging.prejudge import prejudge
from mmcurate.judging.simpleqa import Grade, JudgeItem, LexicalJudge, LLMJudge, make_judge, parse_grade
from mmcurate.models.client import ModelPool


@pytest.mark.parametrize(
    "reply, grade",
    [
        ("CORRECT", Grade.CORRECT),
        ("correct", Grade.CORRECT),
        ("INCORRECT", Grade.INCORRECT),
        ("NOT ATTEMPTED", Grade.NOT_ATTEMPTED),
        ("not_attempted", Grade.NOT_ATTEMPTED),
        ("A", Grade.CORRECT),
        ("B", Grade.INCORRECT),
        ("b", Grade.INCORRECT),
        ("c", Grade.NOT_ATTEMPTED),
        ("  A.\n", Grade.CORRECT),
        ("**B**", Grade.INCORRECT),
        ('"C"', Grade.NOT_ATTEMPTED),
        ('"A".', Grade.CORRECT),
        ("'Incorrect.'", Grade.INCORRECT),
        ("b)", None),  # a list marker, not a grade: retried with a reminder
        ("(B)", None),
        ("The answer is A", None),
        ("A or B", None),
        ("A B", None),
        ("", None),
        ("   ", None),
        ("A..", None),
        ("D", None),
        ("CORRECTLY", None),
        ("NOTATTEMPTED", None),
    ],
)
def test_parse_grade(reply, grade):
    assert parse_grade(reply) is grade


def item(answer: str, gold=("Paris",), ranges=(), key="k") -> JudgeItem:
    return JudgeItem(key, "What is the capital of France?", list(gold), answer, list(ranges))


@pytest.mark.parametrize(
    "answer, gold, ranges, expected",
    [
        ("paris.", ["Paris"], [], (Grade.CORRECT, "prejudge.exact")),
        ("The Eiffel-Tower", ["Eiffel Tower", "tour Eiffel"], [], (Grade.CORRECT, "prejudge.exact")),
        ("Tour  Eiffel!", ["Eiffel Tower", "tour Eiffel"], [], (Grade.CORRECT, "prejudge.exact")),
        ("I don't know.", ["Paris"], [], (Grade.NOT_ATTEMPTED, "prejudge.refusal")),
        ("I cannot answer this question", ["Paris"], [], (Grade.NOT_ATTEMPTED, "prejudge.refusal")),
        ("Unsure", ["Paris"], [], (Grade.NOT_ATTEMPTED, "prejudge.refusal")),
        ("I’m not sure", ["Paris"], [], (Grade.NOT_ATTEMPTED, "prejudge.refusal")),
        ("", ["Paris"], [], (Grade.NOT_ATTEMPTED, "prejudge.refusal")),
        ("I'm not sure, maybe Lyon", ["Paris"], [], None),  # a guess is for the judge
        ("It is about 1,250 metres tall", ["1200"], [(1100.0, 1300.0)], (Grade.CORRECT, "prejudge.numeric")),
        ("Roughly 3.5 km", ["1200"], [(1100.0, 1300.0)], (Grade.INCORRECT, "prejudge.numeric")),
        ("-40 degrees", ["-40"], [(-45.0, -35.0)], (Grade.CORRECT, "prejudge.numeric")),
        ("-40", ["-40"], [], (Grade.CORRECT, "prejudge.exact")),
        ("40", ["-40"], [], None),  # the sign survives normalization
        ("minus forty", ["-40"], [(-45.0, -35.0)], None),
        ("The capital is Paris", ["Paris"], [], None),
    ],
)
def test_prejudge(answer, gold, ranges, expected):
    assert prejudge(item(answer, gold, ranges)) == expected


def test_lexical_judge_containment():
    judge = LexicalJudge()
    items = [
        item("The capital is Paris, of course", key="a"),
        item("It is Lyon", key="b"),
        item("the tower of Eiffel", gold=["Eiffel Tower"], key="c"),  # word order is not checked
        item("Eiffel", gold=["Eiffel Tower"], key="d"),
        item("I don't know", key="e"),
    ]
    got = [(j.key, j.grade, j.by) for j in judge.grade(items, "judge")]
    assert got == [
        ("a", Grade.CORRECT, "lexical.containment"),
        ("b", Grade.INCORRECT, "lexical.containment"),
        ("c", Grade.CORRECT, "lexical.containment"),
        ("d", Grade.INCORRECT, "lexical.containment"),
        ("e", Grade.NOT_ATTEMPTED, "prejudge.refusal"),
    ]
    assert judge.name == "lexical-v1"


JUDGE_RULES = [
    {"when_all": ["Answer to grade: The capital is Paris"], "answer": " A.\n"},
    {"when_all": ["Answer to grade: Lyon, I think"], "answer": "INCORRECT"},
    {"when_all": ["Answer to grade: Hmm", "could not be read"], "answer": "**C**"},
    {"when_all": ["Answer to grade: Hmm"], "answer": "The answer is A"},
    {"when_all": ["Answer to grade: Blah"], "answer": "A or B"},
]


@pytest.fixture
def judge_settings(tmp_path):
    path = tmp_path / "judge.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in JUDGE_RULES))
    spec = ModelSpec(name="judgebot", backend="scripted", script=path, revision="r7")
    return Settings(models={"judgebot": spec}, judge=JudgeSpec(kind="llm", model="judgebot"))


def test_llm_judge_retries_once_then_reports_errors(judge_settings, cache, counter):
    items = [
        item("paris", key="exact"),
        item("The capital is Paris", key="a"),
        item("Lyon, I think", key="b"),
        item("Hmm", key="c"),
        item("Blah", key="e"),
    ]
    with ModelPool(judge_settings, cache, None, counter) as pool:
        judge = make_judge(judge_settings, pool)
        assert isinstance(judge, LLMJudge) and judge.name == "llm:judgebot@r7"
        got = {j.key: (j.grade, j.by, j.raw) for j in judge.grade(items, "judge")}
    assert got == {
        "exact": (Grade.CORRECT, "prejudge.exact", None),
        "a": (Grade.CORRECT, "llm:judgebot", " A.\n"),
        "b": (Grade.INCORRECT, "llm:judgebot", "INCORRECT"),
        "c": (Grade.NOT_ATTEMPTED, "llm:judgebot", "**C**"),  # after the reminder
        "e": (Grade.JUDGE_ERROR, "llm:judgebot", "A or B"),  # never mapped to a grade
    }
    assert judge.stats["judge_error.unparsable"] == 1
    assert judge.stats["llm:judgebot:JUDGE_ERROR"] == 1
    assert counter.totals == {"calls": 6, "cache_hits": 0, "failures": 0}  # 4 asks + 2 reminders


def test_failed_judge_call_is_judge_error(fault_server, fault_spec, cache, counter):
    spec = fault_spec(name="judgebot", max_retries=0)
    settings = Settings(models={"judgebot": spec}, judge=JudgeSpec(kind="llm", model="judgebot"))
    broken = JudgeItem("k", "id=k fault=always500", ["Paris"], "Lyon")
    with ModelPool(settings, cache, None, counter) as pool:
        (judgement,) = make_judge(settings, pool).grade([broken], "judge")
    assert (judgement.grade, judgement.raw) == (Grade.JUDGE_ERROR, None)
    assert counter.totals["failures"] == 1
