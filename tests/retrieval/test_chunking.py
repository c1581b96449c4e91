"""Passages pack whole sentences, carry an overlap, and split only over-long sentences."""

from __future__ import annotations

import re

import pytest

from mmcurate.core.errors import MmcurateError
from mmcurate.retrieval.chunking import chunk_text

# Twelve sentences of exactly ten words each (numbered, so each is recognisable).
SENTENCES = [f"Sentence {i} has exactly ten words for counting purposes here." for i in range(12)]
TEXT = " ".join(SENTENCES)


def words(text: str) -> int:
    return len(text.split())


def test_words_mode_packs_whole_sentences_up_to_size() -> None:
    passages = chunk_text(TEXT, unit="words", size=35, overlap=0)
    # three ten-word sentences fit in 35 words, a fourth would not
    assert [words(p) for p in passages] == [30, 30, 30, 30]
    assert passages[0] == " ".join(SENTENCES[:3])
    assert " ".join(passages) == TEXT  # no overlap: every sentence exactly once, in order


def test_overlap_carries_trailing_sentences() -> None:
    passages = chunk_text(TEXT, unit="words", size=40, overlap=12)
    # 4 sentences per passage; the last sentence (10 <= 12 words) opens the next one
    assert passages[0] == " ".join(SENTENCES[0:4])
    assert passages[1] == " ".join(SENTENCES[3:7])
    assert passages[2] == " ".join(SENTENCES[6:10])
    assert passages[3] == " ".join(SENTENCES[9:12])
    for passage in passages:
        assert words(passage) <= 40


def test_overlap_smaller_than_a_sentence_carries_nothing() -> None:
    passages = chunk_text(TEXT, unit="words", size=40, overlap=5)
    assert " ".join(passages) == TEXT


def test_dpr_style_hundred_word_passages() -> None:
    long_text = " ".join(SENTENCES * 3)  # 360 words
    passages = chunk_text(long_text, unit="words", size=100, overlap=0)
    assert [words(p) for p in passages] == [100, 100, 100, 60]
    assert " ".join(passages) == long_text


def test_sentence_longer_than_size_is_split_by_units() -> None:
    long_sentence = " ".join(f"w{i}" for i in range(25)) + "."
    passages = chunk_text(f"Short one here. {long_sentence} Tail sentence.", unit="words", size=10, overlap=0)
    assert passages[0] == "Short one here."
    assert passages[1] == " ".join(f"w{i}" for i in range(10))
    assert passages[2] == " ".join(f"w{i}" for i in range(10, 20))
    assert passages[3].startswith("w20 w21 w22 w23 w24.")
    assert all(words(p) <= 10 for p in passages)


def test_tokens_mode_counts_minilm_word_pieces() -> None:
    from mmcurate.retrieval.chunking import _tokenizer

    text = "Photogrammetry reconstructs geometry. " * 40
    passages = chunk_text(text, unit="tokens", size=50, overlap=8)
    assert len(passages) > 2
    for passage in passages:
        pieces = _tokenizer().encode(passage, add_special_tokens=False).tokens
        assert len(pieces) <= 50
        assert re.fullmatch(r"(Photogrammetry reconstructs geometry\. ?)+", passage)
    # word pieces outnumber words: 'photogrammetry' alone is several pieces
    assert len(_tokenizer().encode("Photogrammetry", add_special_tokens=False).tokens) > 1


def test_seed_default_is_250_tokens_with_overlap() -> None:
    from mmcurate.core.text import split_sentences

    text = " ".join(SENTENCES * 10)  # 120 sentences of 11 word pieces each
    passages = chunk_text(text)
    assert len(passages) >= 5
    for first, second in zip(passages, passages[1:]):
        # 32 tokens of overlap = the last two 11-piece sentences open the next passage
        assert split_sentences(first)[-2:] == split_sentences(second)[:2]


def test_empty_and_blank_text() -> None:
    assert chunk_text("") == []
    assert chunk_text("   \n\t ") == []


def test_invalid_settings_raise_one_line_errors() -> None:
    with pytest.raises(MmcurateError, match="overlap < size"):
        chunk_text(TEXT, size=10, overlap=10)
    with pytest.raises(MmcurateError, match="unknown chunk unit"):
        chunk_text(TEXT, unit="bytes")  # type: ignore[arg-type]
