"""Deterministic grading: settles the easy cases before any judge model is asked.

Rules, in order:
1. ``prejudge.exact``: the normalized answer (``core.text.normalize``) equals a
   normalized gold answer or alias -> CORRECT.
2. ``prejudge.refusal``: the whole normalized answer is a plain refusal ("I don't know",
   "I cannot answer", "unsure", "no idea", empty, ...) -> NOT_ATTEMPTED. An answer that
   refuses *and* proposes something ("not sure, maybe Paris") is left to the judge.
3. ``prejudge.numeric``: the item has numeric ranges (InfoSeek) and the answer contains a
   number -> InfoSeek's own rule (its evaluation script, ``infoseek_eval.py`` of
   github.com/edchengg/infoseek_eval, linked from open-vision-language.github.io/infoseek):
   the answer is read as its first number, or as the range of its first two when the first
   is not above the second ("9-10" is two numbers: a hyphen after a digit separates them;
   thousands commas are dropped); the gold is the first range of ``answer_eval``. A number
   is CORRECT when it lies in the gold range (inclusive); a range when both its ends do, or
   when its intersection over union with the gold range is at least 0.5. Else INCORRECT.
   An answer without digits is left to the judge ("three hundred"; InfoSeek's script reads
   it as the range [0, 0]).
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
# InfoSeek's number grammar (infoseek_eval.py, ``process_numerical_answer``): a sign, digits with
# thousands commas, a decimal part, an exponent
_NUMBER = re.compile(r"[-+]?\.?\d+(?:,\d{3})*\.?\d*(?:[eE][-+]?\d+)?")
_RANGE_HYPHEN = re.compile(r"(?<=\d)-")  # "9-10": a hyphen after a digit separates two numbers
IOU_MATCH = 0.5  # a range answer is CORRECT at this intersection over union with the gold range
_EPS = 1e-12  # the script's: a range of one point has this length


def numbers(text: str) -> list[float]:
    """The numbers of ``text`` in order, as InfoSeek's script reads them: thousands commas dropped,
    leading and trailing dots stripped ("1.2.3" is 1.2 and 3)."""
    return [float(m.group().replace(",", "").strip(".")) for m in _NUMBER.finditer(_RANGE_HYPHEN.sub(" - ", text))]


def numeric_answer(text: str) -> float | tuple[float, float] | None:
    """The answer as InfoSeek scores it: the range of the first two numbers when the first is not
    above the second, else the first number; None when it has no number."""
    found = numbers(text)[:2]
    if len(found) == 2 and found[0] <= found[1]:
        return found[0], found[1]
    return found[0] if found else None


def numeric_correct(answer: float | tuple[float, float], gold: tuple[float, float]) -> bool:
    """InfoSeek's ``metric_numerical_range`` for a gold range: a number inside it (inclusive); a
    range inside it, or overlapping it with an intersection over union of at least 0.5."""
    lo, hi = gold
    if not isinstance(answer, tuple):
        return lo <= answer <= hi
    low, high = answer
    if lo <= low <= hi and lo <= high <= hi:
        return True
    overlap = max(0.0, min(high, hi) - max(low, lo))
    union = (high - low + _EPS) + (hi - lo + _EPS) - overlap
    return overlap / union >= IOU_MATCH - _EPS


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
        read = numeric_answer(item.answer)
        if read is not None:  # InfoSeek scores against the first range of answer_eval
            right = numeric_correct(read, item.numeric_ranges[0])
            return (Grade.CORRECT if right else Grade.INCORRECT), "prejudge.numeric"
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
