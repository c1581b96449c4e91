"""The Reddit reader's pickers, against line-by-line oracles on raw bytes.

The oracles are the plain Python rules the scanners must reproduce exactly; random runs of
lines mix the byte patterns that make them hard (keys twice, escapes, spaces, long or
broken ids, empty lines, lines cut at the window's edge), and every check is made with each
pass: the C scanner's vector pass and its plain byte loop (where it is built), and the
pure-Python scanner.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmcurate.sources import linescan_py
from mmcurate.sources.reddit import RedditOptions
from mmcurate.sources.reddit_lines import (
    LINK_ID,
    LINK_KEY,
    NO_LINK,
    TITLE_KEY,
    TITLE_WINDOW,
    UNSURE_LINK,
    CommentLines,
    PostLines,
    candidate_keys,
    links_to,
    question_keys,
)

try:
    from mmcurate.sources import _linescan
except ImportError:  # an install without a compiler: only the pure scanner is checked
    _linescan = None


class Pass:
    """One way of scanning: a scanner module, with the C pass's ``vector`` switch where it has one."""

    def __init__(self, scanner, **options) -> None:
        self.scanner, self.options = scanner, options

    def __getattr__(self, name: str):
        function = getattr(self.scanner, name)
        return lambda *args: function(*args, **self.options) if name.startswith("pick_") else function(*args)

    def __repr__(self) -> str:
        return self.scanner.__name__.rpartition(".")[2] + "".join(f"-{k}={v}" for k, v in self.options.items())


PASSES = [Pass(linescan_py)] + ([Pass(_linescan, vector=True), Pass(_linescan, vector=False)] if _linescan else [])
SCANNERS = [linescan_py] + ([_linescan] if _linescan else [])

WORDS = RedditOptions().question_words
MARKERS = (b"i.redd.it", b'"is_gallery"')
FIRST = 7  # the number of the first line of every run


def run_of(lines: list[bytes], lead: bytes = b"") -> tuple[bytes, int, int]:
    """The lines as a run of complete lines after ``lead`` (earlier lines)."""
    data = lead + b"".join(line + b"\n" for line in lines)
    return data, len(lead), len(data)


def posts(lines: list[bytes], scan: Pass, lead: bytes = b"", words: list[str] = WORDS) -> tuple:
    """What the post picker gives for the lines: (picked line indices, counts)."""
    count, picks, counts = scan.pick_posts(
        *run_of(lines, lead), FIRST, MARKERS, TITLE_KEY, question_keys(words), TITLE_WINDOW
    )
    assert count == len(lines) and all(lines[n - FIRST] == line and tag == 0 for n, tag, line in picks)
    return [n - FIRST for n, _, _ in picks], counts


def comments(lines: list[bytes], candidates: set[bytes], scan: Pass, lead: bytes = b"") -> list[int]:
    """The comment picker's lines, each decided as the reader does (``links_to``)."""
    count, picks, counts = scan.pick_comments(
        *run_of(lines, lead), FIRST, LINK_KEY, candidate_keys(candidates, scan.word_hash).tobytes()
    )
    assert count == len(lines) and counts == (0, 0)
    assert all(lines[n - FIRST] == line and tag in (NO_LINK, UNSURE_LINK) for n, tag, line in picks)
    assert all(LINK_KEY not in line for _, tag, line in picks if tag == NO_LINK)
    return [n - FIRST for n, tag, line in picks if tag == NO_LINK or links_to(line, candidates)]


def title_oracle(line: bytes, words: list[str]) -> bool:
    start = line.find(TITLE_KEY)
    if start < 0 or line.find(TITLE_KEY, start + 1) >= 0:
        return False
    head = line[start + len(TITLE_KEY) : start + len(TITLE_KEY) + 24].lstrip(b" ")
    word = re.match(rb"[A-Za-z]+", head)
    if word is None or word.end() == len(head):
        return False
    return word.group().lower() not in {w.lower().encode() for w in words}


def comment_oracle(line: bytes, candidates: set[bytes]) -> bool:
    link = LINK_ID.search(line)
    return bool(line) and not (link and link[1] not in candidates)


@pytest.mark.parametrize(
    "line, ruled_out",
    [
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
    ],
)
@pytest.mark.parametrize("scan", PASSES, ids=repr)
def test_raw_title_test_is_conservative(line: bytes, ruled_out: bool, scan: Pass) -> None:
    assert title_oracle(line, WORDS) is ruled_out
    assert posts([b"i.redd.it " + line], scan) == (([], (0, 1)) if ruled_out else ([0], (0, 0)))


@pytest.mark.parametrize("scan", PASSES, ids=repr)
def test_question_words_are_compared_in_any_case_and_odd_words_never_match(scan: Pass) -> None:
    assert question_keys(["How", "wHo", "¿qué", "what's", "x" * 30]) == (b"how", b"who")
    lines = [
        b'i.redd.it {"title":"how so?"}',
        b'i.redd.it {"title":"Who?"}',
        b'i.redd.it {"title":"que?"}',
        b'i.redd.it {"title":"what s"}',
    ]
    assert posts(lines, scan, words=["How", "wHo", "¿qué", "what's"]) == ([0, 1], (0, 2))
    assert posts(lines, scan, words=[]) == ([], (0, 4))


@pytest.mark.parametrize("scanner", SCANNERS)
def test_more_rules_than_the_c_pass_takes_are_refused_up_front(scanner) -> None:
    PostLines([b"h"] * 6 + [b'"is_gallery"'], [f"w{chr(97 + i % 26)}" * (1 + i // 26) for i in range(64)], scanner)
    with pytest.raises(ValueError, match="at most 6 image hosts and 64 question words"):
        PostLines([b"h"] * 7 + [b'"is_gallery"'], WORDS, scanner)
    with pytest.raises(ValueError, match=r"\(got 1 and 65\)"):
        PostLines(MARKERS, [f"w{chr(97 + i % 26)}" * (1 + i // 26) for i in range(65)], scanner)


@pytest.mark.skipif(_linescan is None, reason="the C scanner is not built here")
def test_the_pure_scanner_has_the_c_passs_limits() -> None:
    assert (linescan_py.MAX_MARKERS, linescan_py.MAX_QUESTIONS) == (_linescan.MAX_MARKERS, _linescan.MAX_QUESTIONS)


@pytest.mark.parametrize("scan", PASSES, ids=repr)
def test_posts_without_a_marker_are_counted_unless_empty(scan: Pass) -> None:
    lines = [b"i.redd.it twice i.redd.it", b"nothing", b'"is_gallery":true', b"", b'both i.redd.it "is_gallery"']
    assert posts(lines, scan) == ([0, 2, 4], (1, 0))


@pytest.mark.parametrize("scan", PASSES, ids=repr)
def test_comment_lines_read_the_first_quoted_link_and_fall_back_to_the_regex(scan: Pass) -> None:
    candidates = {b"abc", b"x_1"}
    lines = [
        b'{"link_id":"t3_abc","id":"c1"}',  # a candidate
        b'{"link_id":"t3_zzz","id":"c2"}',  # another post
        b"",  # empty: nothing to parse
        b'{"id":"c3","body":"no link"}',  # no link: parsed (and checked)
        b'{"link_id":"t3_a-b","x":"k_id\\":\\"t3_abc\\""}',  # first link unreadable, no other
        b'{"link_id":"t3_","parent_id":"t3_abc","k_id":"t3_abc"}',  # regex looks on to a candidate
        b'{"link_id":"t3_' + b"a" * 70 + b'"}',  # too long to hash in C: the regex reads it
        b'{"link_id":"t3_x_1"}',  # underscore is a word byte
        b'{"link_id":"t3_abc',  # cut off before the quote
    ]
    expected = [i for i, line in enumerate(lines) if comment_oracle(line, candidates)]
    assert expected == [0, 3, 4, 5, 7, 8]
    assert comments(lines, candidates, scan, lead=b'ial line"}\n') == expected
    assert comments(lines, set(), scan) == [3, 4, 8]


@pytest.mark.parametrize("scan", PASSES, ids=repr)
def test_the_comment_picker_hashes_the_quoted_word_after_the_first_key(scan: Pass) -> None:
    lines = [
        b'k_id":"t3_abc"',
        b"no key",
        b'k_id":"t3_"',
        b'k_id":"t3_' + b"z" * 64 + b'"',
        b'k_id":"t3_' + b"z" * 65 + b'"',
        b'k_id":"t3_ab',
        b'k_id":"t3_a-b" k_id":"t3_c"',
    ]
    keys = candidate_keys([b"abc", b"z" * 64], scan.word_hash).tobytes()
    _, picks, _ = scan.pick_comments(*run_of(lines), 1, LINK_KEY, keys)
    assert [(n, tag) for n, tag, _ in picks] == [
        (1, UNSURE_LINK),
        (2, NO_LINK),
        (3, UNSURE_LINK),
        (4, UNSURE_LINK),
        (5, UNSURE_LINK),
        (6, UNSURE_LINK),
        (7, UNSURE_LINK),
    ]
    _, picks, _ = scan.pick_comments(*run_of(lines), 1, LINK_KEY, b"")
    assert [n for n, _, _ in picks] == [2, 3, 5, 6, 7]  # hashed words that name no candidate are left out


@pytest.mark.parametrize("scanner", SCANNERS)
def test_candidate_keys_are_sorted_unique_hashes(scanner) -> None:
    keys = candidate_keys([b"x_1", b"abc", b"abc", "é".encode()], scanner.word_hash)
    assert keys.tolist() == sorted({scanner.word_hash(k) for k in (b"x_1", b"abc", "é".encode())})
    assert scanner.word_hash(b"") == 14695981039346656037 & (2**63 - 1)  # FNV-1a's offset basis
    assert scanner.word_hash(b"a") == (14695981039346656037 ^ 0x61) * 1099511628211 % 2**64 & (2**63 - 1)
    assert scanner.word_hash(b"\xff" * 40) == linescan_py.word_hash(b"\xff" * 40)


@pytest.mark.parametrize("scanner", SCANNERS)
def test_the_pickers_check_what_they_are_given(scanner) -> None:
    data = b"ab\nxabab\n\nab\n"
    for start, end in ((0, len(data) - 1), (3, 3), (0, 99), (-1, 4)):
        with pytest.raises(ValueError, match="must be non-empty and end with a newline"):
            scanner.pick_lines(data, start, end, 1)
    with pytest.raises(ValueError, match="without a newline"):
        scanner.pick_comments(data, 0, len(data), 1, b"a\nb", b"")
    with pytest.raises(ValueError, match="sorted int64"):
        scanner.pick_comments(data, 0, len(data), 1, LINK_KEY, b"abc")
    with pytest.raises(ValueError, match="1-7 markers"):
        scanner.pick_posts(data, 0, len(data), 1, (), TITLE_KEY, (), TITLE_WINDOW)
    with pytest.raises(ValueError, match="a window of 1-64 bytes"):
        scanner.pick_posts(data, 0, len(data), 1, MARKERS, TITLE_KEY, (), 65)
    with pytest.raises(ValueError, match="without a newline"):
        scanner.pick_posts(data, 0, len(data), 1, MARKERS, b"", (), TITLE_WINDOW)
    with pytest.raises(TypeError, match="questions must be bytes"):
        scanner.pick_posts(data, 0, len(data), 1, MARKERS, TITLE_KEY, ("what",), TITLE_WINDOW)
    count, picks, counts = scanner.pick_lines(data, 0, len(data), 10)
    assert (count, picks, counts) == (4, [(10, 0, b"ab"), (11, 0, b"xabab"), (13, 0, b"ab")], (0, 0))


@pytest.mark.parametrize("scanner", SCANNERS)
def test_the_picker_classes_call_the_scanner_with_their_rules(scanner) -> None:
    data, start, end = run_of([b'{"title":"Cat","url":"i.redd.it"}', b'{"title":"Why?","url":"i.redd.it"}', b"x"])
    assert PostLines(MARKERS, WORDS, scanner)(data, start, end, 1) == (
        3,
        [(2, 0, b'{"title":"Why?","url":"i.redd.it"}')],
        (1, 1),
    )
    data, start, end = run_of([b'{"link_id":"t3_abc"}', b'{"link_id":"t3_abd"}'])
    assert CommentLines([b"abc"], scanner)(data, start, end, 1) == (
        2,
        [(1, UNSURE_LINK, b'{"link_id":"t3_abc"}')],
        (0, 0),
    )
    assert PostLines.SKIPPED == ("no_image", "not_question") and CommentLines.SKIPPED == ()


PIECES = [
    b'"title":"',
    b'k_id":"t3_',
    b" ",
    b"   ",
    b"What",
    b"how",
    b"Cat",
    b"i.redd.it",
    b'"is_gallery"',
    b"abc",
    b"x_1",
    b"zz9",
    b'"',
    b"\\u00e9",
    b"&amp;",
    b"-",
    b"{",
    b"}",
    b",",
    b"\xc3\xa9",
    b"\x00",
    b"verylongwordthatrunsonandon",
    b"?",
]
LINES = st.lists(st.lists(st.sampled_from(PIECES), max_size=12).map(b"".join), min_size=1, max_size=30)


@settings(max_examples=300, deadline=None)
@given(lines=LINES, lead=st.sampled_from([b"", b"x\n", b"tail of a line\n"]), scan=st.sampled_from(PASSES))
def test_the_pickers_equal_the_line_by_line_rules(lines: list[bytes], lead: bytes, scan: Pass) -> None:
    marked = [i for i, line in enumerate(lines) if any(m in line for m in MARKERS)]
    kept = [i for i in marked if not title_oracle(lines[i], WORDS)]
    unmarked = sum(1 for i, line in enumerate(lines) if line and i not in marked)
    assert posts(lines, scan, lead) == (kept, (unmarked, len(marked) - len(kept)))
    for candidates in ({b"abc", b"x_1"}, set(), {b"zz9"}):
        expected = [i for i, line in enumerate(lines) if comment_oracle(line, candidates)]
        assert comments(lines, candidates, scan, lead) == expected


@pytest.mark.skipif(_linescan is None, reason="the C scanner is not built here")
@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=90).map(lambda b: b.replace(b"\n", b"ab")), min_size=1, max_size=20),
    lead=st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"") + b"\n"),
)
def test_the_vector_pass_equals_the_byte_loop_on_any_bytes(lines: list[bytes], lead: bytes) -> None:
    """Arbitrary bytes (markers and keys cut anywhere, at every distance from a 16- or
    32-byte step's edge): both passes give the same picks and counts."""
    for candidates in ({b"ab"}, set()):
        keys = candidate_keys(candidates, _linescan.word_hash).tobytes()
        assert _linescan.pick_comments(*run_of(lines, lead), 1, LINK_KEY, keys, vector=True) == _linescan.pick_comments(
            *run_of(lines, lead), 1, LINK_KEY, keys, vector=False
        )
    rules = (MARKERS, TITLE_KEY, question_keys(WORDS), TITLE_WINDOW)
    assert _linescan.pick_posts(*run_of(lines, lead), 1, *rules, vector=True) == _linescan.pick_posts(
        *run_of(lines, lead), 1, *rules, vector=False
    )
    assert _linescan.pick_lines(*run_of(lines, lead), 1, vector=True) == _linescan.pick_lines(
        *run_of(lines, lead), 1, vector=False
    )
