"""The Reddit reader's whole-chunk line tests, against line-by-line oracles on raw bytes.

The oracles are the plain Python rules the vectorised tests must reproduce exactly; random
chunks mix the byte patterns that make them hard (keys twice, escapes, spaces, long or
broken ids, empty lines, lines cut at the window's edge).
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmcurate.sources import _linescan
from mmcurate.sources.reddit import RedditOptions
from mmcurate.sources.reddit_lines import (
    COMMENT_PATTERNS, LINK_ID, LINK_KEY, TITLE_KEY, candidate_keys, comment_rows, marked_rows, post_patterns,
    question_keys, titles_rule_out_question,
)
from mmcurate.sources.zst import Chunk

WORDS = RedditOptions().question_words
QUESTIONS = question_keys(WORDS)


MARKERS = [b"i.redd.it", b'"is_gallery"']
PATTERNS = {**post_patterns(MARKERS), **COMMENT_PATTERNS}


def chunk_of(lines: list[bytes], lead: bytes = b"", vector: bool = True) -> Chunk:
    """The lines as one chunk scanned for every pattern, after ``lead`` (earlier lines)."""
    data = lead + b"".join(line + b"\n" for line in lines)
    ends, hits = _linescan.scan_lines(data, len(lead), len(data), list(PATTERNS), list(PATTERNS.values()),
                                      vector=vector)
    table = np.frombuffer(hits, np.int64).reshape(len(lines), -1)
    assert (Chunk.scan(7, data, len(lead), len(data), PATTERNS).ends == np.frombuffer(ends, np.int64)).all()
    columns = np.cumsum([0, *PATTERNS.values()])
    return Chunk(7, data, len(lead), np.frombuffer(ends, np.int64),
                 {p: table[:, a:b] for p, a, b in zip(PATTERNS, columns[:-1], columns[1:])})


def title_oracle(line: bytes, words: list[str]) -> bool:
    start = line.find(TITLE_KEY)
    if start < 0 or line.find(TITLE_KEY, start + 1) >= 0:
        return False
    head = line[start + len(TITLE_KEY):start + len(TITLE_KEY) + 24].lstrip(b" ")
    word = re.match(rb"[A-Za-z]+", head)
    if word is None or word.end() == len(head):
        return False
    return word.group().lower() not in {w.lower().encode() for w in words}


def comment_oracle(line: bytes, candidates: set[bytes]) -> bool:
    link = LINK_ID.search(line)
    return bool(line) and not (link and link[1] not in candidates)


@pytest.mark.parametrize("line, ruled_out", [
    (b'{"id":"a","title":"My cat in the sun","url":"u"}', True),
    (b'{"id":"a","title":"  Look at this?","url":"u"}', True),
    (b'{"id":"a","title":"What is this?","url":"u"}', False),
    (b'{"id":"a","title":"whose coin?","url":"u"}', False),
    (b'{"id":"a","title":"WHY?","url":"u"}', False),
    (b'{"id":"a","title":"&quot;What&quot; is this?","url":"u"}', False),  # entity: parse to know
    (b'{"id":"a","title":"\\u00bfWhat?","url":"u"}', False),  # escape: parse to know
    (b'{"id":"a","title":"Whatever","url":"u"}', True),
    (b'{"id":"a","title":"Who","url":"u"}', False),
    (b'{"id":"a","title":"Incomprehensibilitiesxyz and more"}', False),  # the word outruns the window
    (b'{"title":"Nested post","crosspost_parent_list":[{"title":"What?"}]}', False),  # two titles
    (b'{"id":"a","url":"u"}', False),
    (b'{"id":"a","title":"Cat', False),  # the word runs into the line's end
    (b'{"id":"a","title":"                         Cat"}', False),  # only spaces in the window
])
def test_raw_title_test_is_conservative(line: bytes, ruled_out: bool) -> None:
    assert title_oracle(line, WORDS) is ruled_out
    assert titles_rule_out_question(chunk_of([line]), np.array([0]), QUESTIONS).tolist() == [ruled_out]


def test_question_words_are_compared_in_any_case_and_odd_words_never_match() -> None:
    questions = question_keys(["How", "wHo", "¿qué", "what's", "x" * 30])
    assert questions.tolist() == [b"how", b"who"]
    lines = [b'{"title":"how so?"}', b'{"title":"Who?"}', b'{"title":"que?"}', b'{"title":"what s"}']
    assert titles_rule_out_question(chunk_of(lines), np.arange(4), questions).tolist() == [False, False, True, True]
    assert titles_rule_out_question(chunk_of(lines), np.arange(4), question_keys([])).tolist() == [True] * 4


def test_comment_rows_read_the_first_quoted_link_and_fall_back_to_the_regex() -> None:
    candidates = {b"abc", b"x_1"}
    lines = [
        b'{"link_id":"t3_abc","id":"c1"}',            # a candidate
        b'{"link_id":"t3_zzz","id":"c2"}',            # another post
        b'',                                          # empty: nothing to parse
        b'{"id":"c3","body":"no link"}',              # no link: parsed (and checked)
        b'{"link_id":"t3_a-b","x":"k_id\\":\\"t3_abc\\""}',  # first link unreadable, no other
        b'{"link_id":"t3_","parent_id":"t3_abc","k_id":"t3_abc"}',  # regex looks on to a candidate
        b'{"link_id":"t3_' + b"a" * 70 + b'"}',       # too long to hash in C: the regex reads it
        b'{"link_id":"t3_x_1"}',                      # underscore is a word byte
        b'{"link_id":"t3_abc',                        # cut off before the quote
    ]
    chunk = chunk_of(lines, lead=b'ial line"}\n')
    expected = [i for i, line in enumerate(lines) if comment_oracle(line, candidates)]
    assert expected == [0, 3, 4, 5, 7, 8]
    assert comment_rows(chunk, candidates, candidate_keys(candidates)).tolist() == expected
    assert comment_rows(chunk, set(), candidate_keys(set())).tolist() == [3, 4, 8]


def test_candidate_keys_are_sorted_unique_hashes() -> None:
    keys = candidate_keys([b"x_1", b"abc", b"abc", "é".encode()])
    assert keys.tolist() == sorted({_linescan.word_hash(k) for k in (b"x_1", b"abc", "é".encode())})
    assert _linescan.word_hash(b"") == 14695981039346656037 & (2**63 - 1)  # FNV-1a's offset basis
    assert _linescan.word_hash(b"a") == (14695981039346656037 ^ 0x61) * 1099511628211 % 2**64 & (2**63 - 1)


def test_chunk_word_hashes_read_the_quoted_word_after_the_first_key() -> None:
    lines = [b'k_id":"t3_abc"', b'no key', b'k_id":"t3_"', b'k_id":"t3_' + b"z" * 64 + b'"',
             b'k_id":"t3_' + b"z" * 65 + b'"', b'k_id":"t3_ab', b'k_id":"t3_a-b" k_id":"t3_c"']
    assert chunk_of(lines).word_hashes(LINK_KEY).tolist() == [
        _linescan.word_hash(b"abc"), -1, -2, _linescan.word_hash(b"z" * 64), -2, -2, -2]


def test_marked_rows_find_any_marker_once_per_line() -> None:
    lines = [b"i.redd.it twice i.redd.it", b"nothing", b'"is_gallery":true', b"", b'both i.redd.it "is_gallery"']
    assert marked_rows(chunk_of(lines), MARKERS).tolist() == [0, 2, 4]


def scan_oracle(data: bytes, start: int, patterns: dict[bytes, int]) -> tuple[list[int], list[list[int]]]:
    """``scan_lines`` in plain Python: newline offsets, and per line the first occurrences."""
    ends, rows = [], []
    begin = start
    while (stop := data.find(b"\n", begin)) >= 0:
        row = []
        for pattern, limit in patterns.items():
            found, at = [], data.find(pattern, begin, stop)
            while at >= 0 and len(found) < limit:
                found.append(at)
                at = data.find(pattern, at + 1, stop)
            row += found + [-1] * (limit - len(found))
        ends.append(stop)
        rows.append(row)
        begin = stop + 1
    return ends, rows


def test_line_scanner_primitives_and_their_checks() -> None:
    data = b"ab\nxabab\n\nab\n"
    for vector in (True, False):
        ends, hits = _linescan.scan_lines(data, 0, len(data), [b"ab", b"b"], [2, 1], vector=vector)
        assert np.frombuffer(ends, np.int64).tolist() == [2, 8, 9, 12]
        assert np.frombuffer(hits, np.int64).reshape(4, 3).tolist() == [[0, -1, 1], [4, 6, 5], [-1, -1, -1],
                                                                         [10, -1, 11]]
    for bad in ([data, 0, len(data) - 1, [], []], [data, 3, 3, [], []], [data, 0, 99, [], []],
                [data, 0, len(data), [b""], [1]], [data, 0, len(data), [b"a\nb"], [1]],
                [data, 0, len(data), [b"ab"], [0]], [data, 0, len(data), [b"ab"], [1, 2]]):
        with pytest.raises(ValueError, match="scan_lines"):
            _linescan.scan_lines(*bad)
    offsets, stops = np.array([0, -1], np.int64), np.array([2, 8], np.int64)
    assert np.frombuffer(_linescan.word_hashes(b'a"\n', offsets[:1], stops[:1], 0), np.int64).tolist() == [
        _linescan.word_hash(b"a")]
    with pytest.raises(ValueError, match="inside its line"):
        _linescan.word_hashes(data, np.array([5], np.int64), np.array([4], np.int64), 0)
    with pytest.raises(ValueError, match="one length"):
        _linescan.word_hashes(data, offsets, stops[:1], 0)


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(st.binary(max_size=70).map(lambda b: b.replace(b"\n", b"ab")), min_size=1, max_size=20),
       patterns=st.dictionaries(st.sampled_from([b"ab", b"a", b"aba", b"\x00\xff", b"b" * 17, b'"title":"']),
                                st.integers(1, 3), max_size=4),
       lead=st.binary(max_size=20))
def test_the_vector_pass_equals_the_byte_loop_and_plain_python(lines: list[bytes], patterns: dict[bytes, int],
                                                               lead: bytes) -> None:
    data = lead + b"".join(line + b"\n" for line in lines)
    expected = scan_oracle(data, len(lead), patterns)
    width = sum(patterns.values())
    for vector in (True, False):
        ends, hits = _linescan.scan_lines(data, len(lead), len(data), list(patterns), list(patterns.values()),
                                          vector=vector)
        got = np.frombuffer(hits, np.int64).reshape(-1, width).tolist() if width else [[]] * len(lines)
        assert (np.frombuffer(ends, np.int64).tolist(), got) == expected


PIECES = [b'"title":"', b'k_id":"t3_', b" ", b"   ", b"What", b"how", b"Cat", b"i.redd.it", b'"is_gallery"',
          b"abc", b"x_1", b"zz9", b'"', b"\\u00e9", b"&amp;", b"-", b"{", b"}", b",", b"\xc3\xa9", b"\x00",
          b"verylongwordthatrunsonandon", b"?"]
LINES = st.lists(st.lists(st.sampled_from(PIECES), max_size=12).map(b"".join), min_size=1, max_size=30)


@settings(max_examples=300, deadline=None)
@given(lines=LINES, lead=st.sampled_from([b"", b"x\n", b"tail of a line\n"]))
def test_whole_chunk_tests_equal_the_line_by_line_rules(lines: list[bytes], lead: bytes) -> None:
    chunk = chunk_of(lines, lead, vector=bool(len(lines) % 2))
    marked = marked_rows(chunk, MARKERS)
    assert marked.tolist() == [i for i, line in enumerate(lines) if any(m in line for m in MARKERS)]
    rows = np.arange(len(lines))
    assert titles_rule_out_question(chunk, rows, QUESTIONS).tolist() == [title_oracle(line, WORDS) for line in lines]
    for candidates in ({b"abc", b"x_1"}, set(), {b"zz9"}):
        expected = [i for i, line in enumerate(lines) if comment_oracle(line, candidates)]
        assert comment_rows(chunk, candidates, candidate_keys(candidates)).tolist() == expected
