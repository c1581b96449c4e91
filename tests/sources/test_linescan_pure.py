"""The pure-Python line picker against the C pass: the same picks, counts and quarantine,
byte for byte, on arbitrary bytes, on dumps built to be hard (UTF-8 characters and markers
cut by block boundaries, very long lines), and on the bundled Reddit fixture end to end;
and which of the two an ingest runs and reports."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from mmcurate.cli.app import app
from mmcurate.sources import linescan_py
from mmcurate.sources.ingest import ingest
from mmcurate.sources.linescan import PURE_ENV, line_scanner
from mmcurate.sources.reddit import RedditOptions
from mmcurate.sources.reddit_lines import LINK_KEY, TITLE_KEY, TITLE_WINDOW, CommentLines, PostLines, question_keys
from mmcurate.sources.zst import read_lines

_linescan = pytest.importorskip("mmcurate.sources._linescan", reason="the C scanner is not built here")

WORDS = RedditOptions().question_words
MARKERS = (b"i.redd.it", b'"is_gallery"')
OUTPUTS = ("samples.parquet", "quarantine.parquet", "locators.parquet")


def run_of(lines: list[bytes], lead: bytes) -> tuple[bytes, int, int]:
    data = lead + b"".join(line + b"\n" for line in lines)
    return data, len(lead), len(data)


PIECES = [
    b'"title":"',
    b'"title":"title":"',
    LINK_KEY,
    b" ",
    b"What",
    b"why",
    b"Cat",
    b"i.redd.it",
    b"i.redd.i",
    b'"is_gallery"',
    b"abc",
    b"x_1",
    b'"',
    b"\\u00e9",
    b"\xc3",
    b"\xa9",
    b"\xe6\xbc\xa2",
    b"\x00",
    b"\xff",
    b"z" * 63,
    b"z" * 64,
    b"?",
    b"{",
    b"}",
]
LINES = st.lists(
    st.lists(st.sampled_from(PIECES) | st.binary(max_size=6).map(lambda b: b.replace(b"\n", b"")), max_size=14).map(
        b"".join
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(
    lines=LINES, lead=st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"") + b"\n"), first=st.integers(1, 2**40)
)
def test_the_pure_picker_equals_the_c_pass_on_any_lines(lines: list[bytes], lead: bytes, first: int) -> None:
    data, start, end = run_of(lines, lead)
    assert linescan_py.pick_lines(data, start, end, first) == _linescan.pick_lines(data, start, end, first)
    rules = (MARKERS, TITLE_KEY, question_keys(WORDS), TITLE_WINDOW)
    assert linescan_py.pick_posts(data, start, end, first, *rules) == _linescan.pick_posts(
        data, start, end, first, *rules
    )
    for candidates in ({b"abc", b"x_1", b"z" * 64}, set()):
        keys = CommentLines(candidates, _linescan).keys
        assert keys == CommentLines(candidates, linescan_py).keys
        assert linescan_py.pick_comments(data, start, end, first, LINK_KEY, keys) == _linescan.pick_comments(
            data, start, end, first, LINK_KEY, keys
        )


def hard_dump(seed: int) -> bytes:
    """Reddit-like lines with multi-byte text, markers, links, empty lines and a few lines
    far longer than the rest (some over the reader's line limit)."""
    rng = random.Random(seed)
    lines = []
    for n in range(400):
        title = rng.choice(
            ["What is this \u00e9t\u00e9 thing?", "My \u6f22\u5b57 cat", "  why?", "Cat", "\u00bfQu\u00e9?"]
        )
        host = rng.choice(["i.redd.it", "example.com", "i.redd.it/" + "\u00e9" * rng.randrange(40)])
        link = rng.choice(["abc", "x_1", "q" + str(n), "a-b", "z" * 70])
        body = "\U0001f431 " * rng.choice([0, 3, 50, 3000])  # 3000: 15 kB, over the 4 kB limit below
        lines.append(
            json.dumps(
                {
                    "id": f"p{n}",
                    "title": title,
                    "url": f"https://{host}/{n}.jpg",
                    "link_id": f"t3_{link}",
                    "body": body,
                },
                ensure_ascii=False,
            ).encode()
        )
        if rng.random() < 0.05:
            lines.append(b"")
    return b"\n".join(lines) + rng.choice([b"\n", b""])


@pytest.mark.parametrize("chunk", [7, 61, 4093])
@pytest.mark.parametrize("seed", [1, 2])
def test_the_pure_picker_reads_hard_dumps_as_the_c_pass_does(tmp_path: Path, chunk: int, seed: int) -> None:
    """Through ``read_lines``: blocks of ``chunk`` compressed bytes cut characters, markers
    and keys anywhere; lines over 4 kB are quarantined the same way by both."""
    path = tmp_path / "RS_2023-01.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(hard_dump(seed)))

    def read(scanner, picker) -> list:
        return list(read_lines(path, picker(scanner), max_line_bytes=4096, chunk_bytes=chunk))

    pickers = [
        lambda s: PostLines(MARKERS, WORDS, s),
        lambda s: CommentLines([b"abc", b"x_1", b"q7"], s),
        lambda s: s.pick_lines,
    ]
    for picker in pickers:
        c = read(_linescan, picker)
        assert c == read(linescan_py, picker)
        assert any(not hasattr(item, "picks") for item in c)  # the long lines were quarantined
        assert any(getattr(item, "picks", None) for item in c)


@pytest.fixture(scope="module")
def both_ingests(fixtures_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The bundled Reddit fixture ingested with each picker (and without the prefilter)."""
    outs = {}
    with pytest.MonkeyPatch.context() as patch:
        for pure in ("0", "1"):
            patch.setenv(PURE_ENV, pure)
            for prefilter in (True, False):
                out = tmp_path_factory.mktemp(f"pure{pure}-prefilter{prefilter}")
                ingest("reddit", fixtures_root / "reddit", out, options={"prefilter": prefilter})
                outs[pure, prefilter] = out
    return outs


@pytest.mark.parametrize("prefilter", [True, False])
def test_the_fixture_ingests_byte_identically_with_either_picker(both_ingests, prefilter: bool) -> None:
    c, pure = both_ingests["0", prefilter], both_ingests["1", prefilter]
    for name in OUTPUTS:
        assert (c / name).read_bytes() == (pure / name).read_bytes(), name
    images = sorted(p.relative_to(c) for p in (c / "images").rglob("*") if p.is_file())
    assert images and images == sorted(p.relative_to(pure) for p in (pure / "images").rglob("*") if p.is_file())
    report_c, report_pure = (json.loads((out / "ingest.json").read_text()) for out in (c, pure))
    assert (report_c.pop("reader"), report_pure.pop("reader")) == ({"line_picker": "c"}, {"line_picker": "python"})
    assert report_c == report_pure and report_c["quarantined"] > 0


def test_the_scanner_is_chosen_by_what_is_built_and_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PURE_ENV, raising=False)
    assert line_scanner() == ("c", _linescan)
    monkeypatch.setenv(PURE_ENV, "0")
    assert line_scanner() == ("c", _linescan)
    monkeypatch.setenv(PURE_ENV, "1")
    assert line_scanner() == ("python", linescan_py)
    monkeypatch.delenv(PURE_ENV)
    monkeypatch.setitem(sys.modules, "mmcurate.sources._linescan", None)  # as if never built: import fails
    assert line_scanner() == ("python", linescan_py)


def test_the_ingest_command_says_which_picker_ran(
    fixtures_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 42 item 22: the line ended "line picker: c", a name only the code knows; it says what ran."""
    said = {
        "python": "; lines picked in pure Python (same output, slower: no C scanner built, or MMCURATE_PURE_PICKER=1)",
        "c": "; lines picked by the compiled C scanner",
    }
    for pure, name in (("1", "python"), ("0", "c")):
        monkeypatch.setenv(PURE_ENV, pure)
        out = tmp_path / name
        result = CliRunner().invoke(app, ["ingest", "reddit", str(fixtures_root / "reddit"), "--out", str(out)])
        assert result.exit_code == 0, result.output
        line = result.output.strip()
        assert f"quarantined -> {out / 'quarantine.parquet'}; " in line and line.endswith(said[name])
        assert json.loads((out / "ingest.json").read_text())["reader"] == {"line_picker": name}
