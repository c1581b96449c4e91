"""Judge vocabulary shared by the pre-judge and the judges (re-exported by ``judge``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Grade(StrEnum):
    CORRECT = "CORRECT"
    INCORRECT = "INCORRECT"
    NOT_ATTEMPTED = "NOT_ATTEMPTED"
    JUDGE_ERROR = "JUDGE_ERROR"  # the judge gave no readable grade: counted, never a label


@dataclass(frozen=True)
class JudgeItem:
    key: str
    question: str
    gold: list[str]  # the gold answer and its aliases
    answer: str
    numeric_ranges: tuple[tuple[float, float], ...] = ()  # InfoSeek numeric


@dataclass(frozen=True)
class Judgement:
    key: str
    grade: Grade
    by: str  # "prejudge.exact", "prejudge.refusal", "prejudge.numeric", "lexical.containment", "llm:<model>"
    raw: str | None  # the judge model's last reply, when one was asked
