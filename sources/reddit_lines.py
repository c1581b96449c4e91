"""Which lines of a Reddit dump chunk must be parsed, decided on raw bytes for all lines at once.

A pushshift month is tens of millions of lines, of which well under 1% matter. Each
function here looks at every line of a ``zst.Chunk`` through the pattern offsets the reader
found while scanning it (``post_patterns``, ``COMMENT_PATTERNS``) and numpy over
fixed-width windows of bytes, never with a Python loop over lines.
Each is exact: it answers what a line-by-line test of the raw bytes would, and a line
whose bytes it cannot judge that way (rare: an escaped or over-long id, two titles) is
parsed, or left to the line-by-line regex, never guessed.
"""
from __future__ import annotations

import re
from collections.abc import Container, Iterable, Sequence

import numpy as np

from ._linescan import word_hash
from .zst import Chunk

TITLE_KEY = b'"title":"'
TITLE_WINDOW = 24  # bytes of a raw title looked at: more than any question word
LINK_KEY = b'k_id":"t3_'  # a comment's link to its post: ``"link_id":"t3_<id>"``
LINK_ID = re.compile(rb'k_id":"t3_(\w+)"')  # the same link as a regex: the rule the scan implements
COMMENT_PATTERNS = {LINK_KEY: 1}  # what a chunk of comments is scanned for

_BYTES = np.arange(256, dtype=np.uint8)
_LETTER = ((_BYTES >= ord("A")) & (_BYTES <= ord("Z"))) | ((_BYTES >= ord("a")) & (_BYTES <= ord("z")))
_LOWER = np.where((_BYTES >= ord("A")) & (_BYTES <= ord("Z")), _BYTES + 32, _BYTES).astype(np.uint8)
_ASCII_WORD = re.compile(r"[A-Za-z]+")


def windows(data: np.ndarray, begins: np.ndarray, stops: np.ndarray, width: int) -> np.ndarray:
    """``width`` bytes of ``data`` from each of ``begins``, as rows; bytes at or after the
    row's ``stops`` are 0, so a window never shows what lies past its line."""
    at = begins[:, None] + np.arange(width)
    return np.where(at < stops[:, None], data[np.minimum(at, len(data) - 1)], np.uint8(0))


def as_keys(rows: np.ndarray) -> np.ndarray:
    """Rows of bytes as fixed-width byte strings (trailing zeros do not count), to compare
    or look up whole."""
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    return rows.view(f"S{rows.shape[1]}").ravel()


def post_patterns(markers: Iterable[bytes]) -> dict[bytes, int]:
    """What a chunk of posts is scanned for (``zst.read_chunks``): each marker, and the
    title key twice (a second title means a nested post)."""
    return {**{marker: 1 for marker in markers}, TITLE_KEY: 2}


def marked_rows(chunk: Chunk, markers: Iterable[bytes]) -> np.ndarray:
    """The indices of the chunk's lines holding any of ``markers``, in order."""
    marked = np.zeros(chunk.lines, bool)
    for marker in markers:
        marked |= chunk.hits(marker)[:, 0] >= 0
    return np.flatnonzero(marked)


def question_keys(words: Sequence[str]) -> np.ndarray:
    """The question words a raw title can be compared with: lowercase ASCII words that fit
    the window, as sorted keys. Any other word never equals a title's opening ASCII word."""
    kept = {w.lower().encode() for w in words if _ASCII_WORD.fullmatch(w) and len(w) < TITLE_WINDOW}
    return np.sort(np.array(sorted(kept), dtype=f"S{TITLE_WINDOW}"))


def titles_rule_out_question(chunk: Chunk, rows: np.ndarray, questions: np.ndarray) -> np.ndarray:
    """For each line of ``rows``: True when its raw title surely is not a question.

    Decides only when ``"title":"`` occurs once in the line (no nested post) and the title,
    after leading spaces, opens with a plain ASCII word ending within TITLE_WINDOW bytes
    and the line; that word, in any case, is then compared with ``questions``
    (``question_keys``). Anything else (entities, escapes, non-ASCII, a long word) is left
    to the full parse, so no post the full rules would keep is ruled out.
    """
    ruled_out = np.zeros(len(rows), bool)
    hits = chunk.hits(TITLE_KEY)[rows]
    once = np.flatnonzero((hits[:, 0] >= 0) & (hits[:, 1] < 0))
    if not len(once):
        return ruled_out
    data = np.frombuffer(chunk.data, np.uint8)
    begins, stops = hits[once, 0] + len(TITLE_KEY), chunk.ends[rows[once]]
    head = windows(data, begins, stops, TITLE_WINDOW)
    size = np.minimum(stops - begins, TITLE_WINDOW)  # bytes of the window inside the line
    lead = np.argmin(head == ord(" "), axis=1)  # first byte that is not a space (0 if all are)
    letters = _LETTER[head]
    opens = letters[np.arange(len(once)), lead]
    after = ~letters & (np.arange(TITLE_WINDOW) >= lead[:, None])
    end = np.where(after.any(axis=1), np.argmax(after, axis=1), TITLE_WINDOW)  # where the word stops
    word = as_keys(_LOWER[windows(data, begins + lead, begins + end, TITLE_WINDOW)])
    at = np.minimum(np.searchsorted(questions, word), max(len(questions) - 1, 0))
    asked = questions[at] == word if len(questions) else np.zeros(len(once), bool)
    ruled_out[once] = opens & (end < size) & ~asked  # end == size: the word may run on past the window
    return ruled_out


def candidate_keys(candidates: Iterable[bytes]) -> np.ndarray:
    """The hashes (``Chunk.word_hashes``) of the post ids a comment's link can name, sorted."""
    return np.unique(np.array([word_hash(key) for key in candidates], np.int64))


def comment_rows(chunk: Chunk, candidates: Container[bytes], keys: np.ndarray) -> np.ndarray:
    """The indices of the chunk's comment lines to parse, in order: those whose first link
    (``LINK_ID``, searched from the line's start) names a candidate post, and non-empty
    lines without any link (parsing them quarantines what is broken).

    ``keys`` is ``candidate_keys(candidates)``. The word after each line's first
    ``"link_id":"t3_`` is hashed in C; the regex decides the few lines whose hash is a
    candidate's (confirming the id itself) or whose first link is no quoted word (the regex
    searches on past it).
    """
    links = chunk.word_hashes(LINK_KEY)
    parse = (links == -1) & (chunk.ends > chunk.starts())
    doubt = links == -2
    if len(keys):
        doubt |= keys[np.minimum(np.searchsorted(keys, links), len(keys) - 1)] == links
    for row in np.flatnonzero(doubt):
        link = LINK_ID.search(chunk.line(int(row)))
        parse[row] = link is None or link[1] in candidates
    return np.flatnonzero(parse)
