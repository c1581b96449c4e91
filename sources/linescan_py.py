"""The line picker in pure Python: the functions of the C pass ``_linescan`` with the same
arguments, limits, errors and answers, byte for byte, for an install that has no compiled
extension (no C compiler, or one without ``__builtin_ctzll`` such as MSVC).

The contract is the one in ``_linescan.c``'s header: each function decides the complete
lines ``data[start:end]`` (numbered from ``first``) and returns ``(lines, picks, counts)``.
Where the C pass finds pattern occurrences with vectors, this looks at one line at a time
with ``bytes`` methods: a pattern holds no newline, so an occurrence always lies inside the
line it starts in, and ``line.find`` sees the same occurrences (overlapping ones included).
It is several times slower (docs/commands/ingest.md, "Reddit at dump scale"); tests/sources/test_linescan_pure.py checks
it against the C pass.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left

MAX_MARKERS = 7  # the C pass's MAX_PATTERNS - 1: the title key takes one
MAX_QUESTIONS = 64
MAX_WINDOW = 64  # bytes of a title the post rule may look at
WORD_MAX = 64  # longer linked words are left to the caller's regex
_FNV_OFFSET, _FNV_PRIME = 14695981039346656037, 1099511628211
_UINT64, _INT64_MAX = (1 << 64) - 1, (1 << 63) - 1
_TITLE_WORD = re.compile(rb" *([A-Za-z]+)")  # a title's opening ASCII word, after spaces
_LINKED_WORD = re.compile(rb"[0-9A-Za-z_]{1,%d}(?=\")" % WORD_MAX)  # a regex word closed by a quote

Pick = tuple[int, int, bytes]
Result = tuple[int, list[Pick], tuple[int, int]]


def word_hash(word: bytes) -> int:
    """FNV-1a (64 bits) of the bytes, made non-negative."""
    h = _FNV_OFFSET
    for byte in word:
        h = ((h ^ byte) * _FNV_PRIME) & _UINT64
    return h & _INT64_MAX


def _check_pattern(pattern: bytes) -> None:
    if not isinstance(pattern, bytes) or not pattern or b"\n" in pattern:
        raise ValueError("linescan: each pattern is non-empty bytes without a newline")


def _lines(data: bytes, start: int, end: int) -> list[bytes]:
    """The lines of ``data[start:end]``, newlines left off."""
    if start < 0 or end <= start or end > len(data) or data[end - 1] != 0x0A:
        raise ValueError("linescan: data[start:end] must be non-empty and end with a newline")
    return data[start : end - 1].split(b"\n")


def pick_lines(data: bytes, start: int, end: int, first: int) -> Result:
    """Every non-empty line, tag 0."""
    lines = _lines(data, start, end)
    return len(lines), [(first + n, 0, line) for n, line in enumerate(lines) if line], (0, 0)


def _title_rules_out(line: bytes, after: int, questions: frozenset[bytes], window: int) -> bool:
    """Whether the title starting at ``line[after]`` surely is no question: its first
    ``window`` bytes open (after spaces) with an ASCII word that ends inside them and is,
    lowercased, none of ``questions``."""
    head = line[after : after + window]
    word = _TITLE_WORD.match(head)
    return word is not None and word.end() < len(head) and word[1].lower() not in questions


def pick_posts(
    data: bytes,
    start: int,
    end: int,
    first: int,
    markers: tuple[bytes, ...],
    title_key: bytes,
    questions: tuple[bytes, ...],
    window: int,
) -> Result:
    """The lines holding any of ``markers`` whose raw title does not rule out a question
    (tag 0); counts: (unmarked non-empty lines, marked lines whose title rules it out)."""
    if not 1 <= len(markers) <= MAX_MARKERS or len(questions) > MAX_QUESTIONS or not 1 <= window <= MAX_WINDOW:
        raise ValueError("pick_posts: 1-7 markers, at most 64 questions, a window of 1-64 bytes")
    for pattern in (*markers, title_key):
        _check_pattern(pattern)
    if not all(isinstance(word, bytes) for word in questions):
        raise TypeError("pick_posts: questions must be bytes")
    lines = _lines(data, start, end)
    known = frozenset(questions)
    picks: list[Pick] = []
    unmarked = ruled_out = 0
    for n, line in enumerate(lines):
        for marker in markers:
            if marker in line:
                break
        else:
            unmarked += bool(line)
            continue
        at = line.find(title_key)
        if at >= 0 and line.find(title_key, at + 1) < 0 and _title_rules_out(line, at + len(title_key), known, window):
            ruled_out += 1
        else:
            picks.append((first + n, 0, line))
    return len(lines), picks, (unmarked, ruled_out)


def pick_comments(data: bytes, start: int, end: int, first: int, link_key: bytes, keys: bytes) -> Result:
    """Per line, the word closed by a quote right after the first ``link_key``: lines
    without ``link_key`` are picked with tag 0 when non-empty, lines whose word's
    ``word_hash`` is in ``keys`` (sorted int64, native byte order) or that have no such
    word with tag 1."""
    if len(keys) % 8:
        raise ValueError("pick_comments: keys must be sorted int64")
    _check_pattern(link_key)
    lines = _lines(data, start, end)
    hashes = array("q")
    hashes.frombytes(keys)
    wanted = hashes.tolist()

    def known(h: int) -> bool:  # the C pass's binary search: the same answer for any keys
        at = bisect_left(wanted, h)
        return at < len(wanted) and wanted[at] == h

    picks: list[Pick] = []
    skip = len(link_key)
    for n, line in enumerate(lines):
        at = line.find(link_key)
        if at < 0:
            if line:
                picks.append((first + n, 0, line))
            continue
        word = _LINKED_WORD.match(line, at + skip)
        if word is None or known(word_hash(word[0])):
            picks.append((first + n, 1, line))
    return len(lines), picks, (0, 0)
