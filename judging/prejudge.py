"""Deterministic grading: settles the easy cases before any judge model is asked.

Rules, in order:
1. ``prejudge.exact``: the normalized answer (``core.text.normalize``) equals a
   normalized gold answer or alias -> CORRECT.
2. ``prejudge.refusal``: the whole normalized answer is a plain refusal ("I don't know",
   "I cannot answer", "unsure", "no idea", empty, ...) -> NOT_ATTEMPTED. An answer that
   refuses *and* proposes something ("not sure, maybe Paris") is left to the judge.
3. ``prejudge.numeric``: the item has numeric ranges (InfoSeek) and the answer contains
   numbers -> CORRECT if any number lies in any range (inclusive), else INCORRECT.
Anything else returns None (the judge decides).

``lexical_grade`` is the offline judge for the rest (``lexical.containment``): CORRECT
when every content token (``core.text.content_tokens``; all its words when a gold answer
is nothing but stopwords) of some gold answer occurs among the answer's words, else
INCORRECT. It cannot see contradictions ("not
Paris" contains "Paris") or paraphrases; it stands in when no judge model is available
and the release manifest names it ("lexical-v1").
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from mmcurate.core.text import content_tokens, normalize, word_set

from mmcurate.judging.grades import Grade, JudgeItem

_REFUSALS = [
    r"",
    r"(i )?(dont|do not|did not|didnt) know( answer| that| this)?",
    r"(i )?(cannot|cant|can not|could not|couldnt|am unable to|m unable to|am not able to) "
    r"(answer|say|tell|determine|know|help)( that| this| question| answer| with that| with this)*",
    r"(i am |im )?(unsure|not sure)",
    r"(i have )?no idea",
    r"unknown|n a|no answer",
]
_REFUSAL = re.compile("|".join(f"(?:{r})" for r in _REFUSALS))
_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def numbers(text: str) -> list[float]:
    return [float(m.group().replace(",", "")) for m in _NUMBER.finditer(text)]


def is_refusal(answer: str) -> bool:
    return _REFUSAL.fullmatch(normalize(answer)) is not None


def prejudge(item: JudgeItem) -> tuple[Grade, str] | None:
    """(grade, rule) when a deterministic rule settles ``item``, else None."""
    answer = normalize(item.answer)
    if answer and any(answer == normalize(g) for g in item.gold if normalize(g)):
        return Grade.CORRECT, "prejudge.exact"
    if is_refusal(item.answer):
        return Grade.NOT_ATTEMPTED, "prejudge.refusal"
    if item.numeric_ranges:
        found = numbers(item.answer)
        if found:
            inside = any(lo <= x <= hi for x in found for lo, hi in item.numeric_ranges)
            return (Grade.CORRECT if inside else Grade.INCORRECT), "prejudge.numeric"
    return None


def lexical_grade(item: JudgeItem) -> Grade:
    answer = word_set(item.answer)
    golds = [content_tokens(g) or word_set(g) for g in item.gold]
    return Grade.CORRECT if any(g and g <= answer for g in golds) else Grade.INCORRECT


def prejudged(items: Sequence[JudgeItem]) -> tuple[dict[int, tuple[Grade, str]], list[int]]:
    """({index: (grade, rule)} of the items a rule settles, indices of the rest): the rest go
    to the judge model in one batch."""
    settled: dict[int, tuple[Grade, str]] = {}
    rest: list[int] = []
    for index, item in enumerate(items):
        found = prejudge(item)
        if found is None:
            rest.append(index)
        else:
            settled[index] = found
    return settled, rest
