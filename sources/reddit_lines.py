"""Which lines of a Reddit dump must be parsed, decided on raw bytes as the dump streams past.

A pushshift month is tens of millions of lines, of which well under 1% matter. The pickers
here are ``zst.Picker``s: each runs one pass of a line scanner (``linescan.line_scanner``:
the C pass ``_linescan``, or the same in pure Python) over a run of complete lines in
``zst.read_lines``'s background thread and copies out only the lines to parse. Each is exact: it answers what a line-by-line test of the raw bytes would, and a
line whose bytes it cannot judge that way (rare: an escaped or over-long id, two titles)
is picked to be parsed, or left to the line-by-line regex (``links_to``), never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterable, Sequence
from types import ModuleType

import numpy as np

from .zst import Pick

TITLE_KEY = b'"title":"'
TITLE_WINDOW = 24  # bytes of a raw title looked at: more than any question word
LINK_KEY = b'k_id":"t3_'  # a comment's link to its post: ``"link_id":"t3_<id>"``
LINK_ID = re.compile(rb'k_id":"t3_(\w+)"')  # the same link as a regex: the rule the scan implements
NO_LINK, UNSURE_LINK = 0, 1  # the tags of picked comment lines
_ASCII_WORD = re.compile(r"[A-Za-z]+")


def question_keys(words: Sequence[str]) -> tuple[bytes, ...]:
    """The question words a raw title can be compared with: lowercase ASCII words that fit
    the window. Any other word never equals a title's opening ASCII word."""
    kept = {w.lower().encode() for w in words if _ASCII_WORD.fullmatch(w) and len(w) < TITLE_WINDOW}
    return tuple(sorted(kept))


class PostLines:
    """Picks the posts to parse: lines holding an image marker whose raw title does not
    already rule out a question. ``counts`` of a batch are ``SKIPPED``: the non-empty lines
    without a marker, and the marked lines whose title opens with a plain ASCII word that
    is no question word (only when ``"title":"`` occurs once: no nested post)."""

    SKIPPED = ("no_image", "not_question")

    def __init__(self, markers: Iterable[bytes], question_words: Sequence[str], scanner: ModuleType) -> None:
        self.markers = tuple(markers)
        self.questions = question_keys(question_words)
        self.scanner = scanner
        limits = scanner.MAX_MARKERS, scanner.MAX_QUESTIONS
        if len(self.markers) > limits[0] or len(self.questions) > limits[1]:
            raise ValueError(
                f"at most {limits[0] - 1} image hosts and {limits[1]} question words "
                f"(got {len(self.markers) - 1} and {len(self.questions)})"
            )

    def __call__(self, data: bytes, start: int, end: int, first: int) -> tuple[int, list[Pick], tuple[int, ...]]:
        return self.scanner.pick_posts(data, start, end, first, self.markers, TITLE_KEY, self.questions, TITLE_WINDOW)


def candidate_keys(candidates: Iterable[bytes], word_hash: Callable[[bytes], int]) -> np.ndarray:
    """The hashes (a scanner's ``word_hash``) of the post ids a comment's link can name, sorted."""
    return np.unique(np.array([word_hash(key) for key in candidates], np.int64))


class CommentLines:
    """Picks the comments whose first link (``LINK_ID``, searched from the line's start) may
    name one of ``candidates``, and the non-empty lines without any link (parsing them
    quarantines what is broken; tag NO_LINK).

    The word after each line's first ``"link_id":"t3_`` is hashed by the scanner; a line whose hash
    is a candidate's, or whose first link is no quoted word, is picked with tag UNSURE_LINK
    and ``links_to`` decides it with the regex (confirming the id itself, or searching on
    past an unreadable first link). Nothing else is picked and no count is kept.
    """

    SKIPPED: tuple[str, ...] = ()

    def __init__(self, candidates: Iterable[bytes], scanner: ModuleType) -> None:
        self.keys = candidate_keys(candidates, scanner.word_hash).tobytes()
        self.scanner = scanner

    def __call__(self, data: bytes, start: int, end: int, first: int) -> tuple[int, list[Pick], tuple[int, ...]]:
        return self.scanner.pick_comments(data, start, end, first, LINK_KEY, self.keys)


def links_to(line: bytes, candidates: Container[bytes]) -> bool:
    """Whether a comment line picked with UNSURE_LINK must be parsed: its first link names
    a candidate, or it has no link the regex can read (parsing then says what is wrong)."""
    link = LINK_ID.search(line)
    return link is None or link[1] in candidates
