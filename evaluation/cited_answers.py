"""Reading a long-form answer that cites numbered documents per sentence, strictly.

A citation is a bracket holding document numbers: ``[1]``, ``[2, 3]``; adjacent brackets
(``[1][3]``) add up. The answer is split into sentences (``core.text.split_sentences``);
citations that open a split piece (``Paris is large. [1] It is old.`` splits before the
``[1]``) belong to the sentence before it. Each sentence keeps its text without the citations and the documents it cites.

Strict: a bracket holding a digit must be a citation list of numbers between 1 and the
number of documents shown; anything else (``[6]`` of five documents, ``[1-3]``, ``[doc 2]``)
makes the whole answer unreadable (None), which the caller retries once and then counts
as an error, never guessing what was meant. Brackets without digits are plain text. An
empty answer is unreadable too; an answer with no citation at all is readable (each of
its sentences cites nothing).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from mmcurate.core.text import split_sentences

_BRACKET = re.compile(r"\[([^\[\]]*)\]")
_CITATION = re.compile(r"^\s*\d+\s*(,\s*\d+\s*)*$")
_LEADING = re.compile(r"^\s*(\[[^\[\]]*\d[^\[\]]*\][\s.,;:!?]*)+")


@dataclass(frozen=True)
class CitedSentence:
    text: str  # without its citation brackets
    cites: tuple[int, ...]  # 1-based document numbers, in order of first mention


def _citations(text: str, shown: int) -> list[int] | None:
    """The numbers cited in ``text``, or None when a bracket with a digit is not a valid citation."""
    found: list[int] = []
    for match in _BRACKET.finditer(text):
        inside = match.group(1)
        if not any(c.isdigit() for c in inside):
            continue
        if not _CITATION.match(inside):
            return None
        numbers = [int(part) for part in inside.split(",")]
        if any(not 1 <= n <= shown for n in numbers):
            return None
        found += [n for n in numbers if n not in found]
    return found


def _strip(text: str) -> str:
    bare = _BRACKET.sub(lambda m: "" if any(c.isdigit() for c in m.group(1)) else m.group(0), text)
    bare = re.sub(r"\s+([.,;:!?])", r"\1", bare)
    return " ".join(bare.split())


def parse_cited_answer(text: str, shown: int) -> list[CitedSentence] | None:
    """The answer's sentences with their citations, or None when unreadable (see the module docstring)."""
    if not text or not text.strip():
        return None
    if _citations(text, shown) is None:
        return None
    sentences: list[CitedSentence] = []
    for piece in split_sentences(text.strip()):
        lead = _LEADING.match(piece)
        if lead and sentences:  # "... large. [1] It is old." splits before the [1]: it ends the sentence before
            last = sentences[-1]
            extra = _citations(lead.group(0), shown) or []
            sentences[-1] = CitedSentence(last.text, last.cites + tuple(n for n in extra if n not in last.cites))
            piece = piece[lead.end():]
        bare = _strip(piece)
        if any(c.isalnum() for c in bare):
            sentences.append(CitedSentence(bare, tuple(_citations(piece, shown) or [])))
    return sentences or None
