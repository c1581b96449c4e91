"""Reading a long-form answer that cites numbered documents per sentence, strictly.

A citation is a bracket holding document numbers: ``[1]``, ``[2, 3]``; adjacent brackets
(``[1][3]``) add up. The answer is split into sentences (``core.text.split_sentences``);
citations that open a split piece (``Paris is large. [1] It is old.`` splits before the
``[1]``) belong to the sentence before it. Each sentence keeps its text without the citations and the documents it cites.

Strict: a bracket holding a digit must be a citation list of numbers (``[1-3]``, ``[doc 2]``
make the whole answer unreadable, None, which the caller retries once and then counts as an
error, never guessing what was meant). A number outside 1 to the number of documents shown
(``[6]`` of five documents, ``[0]``) is an invalid citation: the answer is read and scored,
and the sentence keeps it apart (``invalid``); the seed paper grades a sentence with no cited
document "not supported" (004 section 4.2), so a sentence whose citations are all invalid
scores 0 and its valid ones count. Brackets without digits are plain text. An empty answer
is unreadable too; an answer with no citation at all is readable (each of its sentences
cites nothing).
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
    invalid: tuple[int, ...] = ()  # cited numbers of no shown document, in order of first mention


def _citations(text: str, shown: int) -> tuple[list[int], list[int]] | None:
    """(the shown documents' numbers cited in ``text``, the numbers of no shown document), or
    None when a bracket with a digit is not a citation list."""
    found: list[int] = []
    invalid: list[int] = []
    for match in _BRACKET.finditer(text):
        inside = match.group(1)
        if not any(c.isdigit() for c in inside):
            continue
        if not _CITATION.match(inside):
            return None
        for n in (int(part) for part in inside.split(",")):
            mine = found if 1 <= n <= shown else invalid
            if n not in mine:
                mine.append(n)
    return found, invalid


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
            extra, bad = _citations(lead.group(0), shown) or ([], [])
            sentences[-1] = CitedSentence(
                last.text,
                last.cites + tuple(n for n in extra if n not in last.cites),
                last.invalid + tuple(n for n in bad if n not in last.invalid),
            )
            piece = piece[lead.end() :]
        bare = _strip(piece)
        if any(c.isalnum() for c in bare):
            cites, bad = _citations(piece, shown) or ([], [])
            sentences.append(CitedSentence(bare, tuple(cites), tuple(bad)))
    return sentences or None
