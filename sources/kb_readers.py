"""Streaming readers of the knowledge bases behind the knowledge-based VQA sources.

The published KBs are large (Wiki6M 6.9 GB gzipped, the Encyclopedic-VQA KB a single
JSON object of 2M articles, KILT Wikipedia 35 GB): every reader streams its file once and
keeps only the entries whose ids the caller asks for, stopping early when all are found.
KB lines that mention a wanted id but cannot be read are reported as ``Rejected``
(locator ``file:line``) so the adapter can quarantine them; they never stop the read.
Lines about entries nobody asked for are not parsed at all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from mmcurate.core.errors import SourceError
from mmcurate.core.records import Rejected

from .base import jsonl_records
from .json_members import JsonMembersError, Unreadable, iter_members

T = TypeVar("T")
KB_MAX_CHARS = 1 << 26  # a KB entry (a whole article) may be long; a longer line is reported, never buffered


def locate(source: str, root: Path, given: Path | None, defaults: Sequence[str], what: str) -> Path | None:
    """An adapter's optional input file: ``given`` (relative to ``root``) must exist;
    otherwise the first of ``defaults`` present in ``root``, or None."""
    if given is not None:
        path = given if given.is_absolute() else root / given
        if not path.is_file():
            raise SourceError(f"{source}: {what} file {path} not found")
        return path
    return next((root / name for name in defaults if (root / name).is_file()), None)


@dataclass
class KBLoad(Generic[T]):
    """The entries found for the wanted ids, and the KB lines that could not be read."""

    entries: dict[str, T] = field(default_factory=dict)
    problems: list[Rejected] = field(default_factory=list)


def _scan_jsonl(
    path: Path,
    wanted: Collection[str],
    candidate_ids: Callable[[str], set[str]],
    parse: Callable[[dict[str, Any]], tuple[list[str], T]],
) -> KBLoad[T]:
    """Stream ``path`` once, fully parsing only lines that may hold a wanted id.

    ``candidate_ids`` is a cheap regex look at the raw line (false positives are fine:
    the parsed record decides); ``parse`` returns the record's real keys and its entry.
    """
    result: KBLoad[T] = KBLoad()
    remaining = set(wanted)
    lines = jsonl_records(
        path, "unreadable KB entry", keep=lambda line: bool(candidate_ids(line) & remaining), max_chars=KB_MAX_CHARS
    )
    while remaining:
        item = next(lines, None)
        if item is None:
            break
        if isinstance(item, Rejected):
            result.problems.append(item)
            continue
        try:
            keys, entry = parse(item.record)
        except (ValueError, TypeError, KeyError) as exc:
            result.problems.append(Rejected(item.locator, f"unreadable KB entry: {exc}", item.raw))
            continue
        for key in keys:
            if key in remaining:
                result.entries[key] = entry
                remaining.discard(key)
    lines.close()
    return result


# --------------------------------------------------------------------------- Wiki6M


@dataclass(frozen=True)
class Wiki6MEntity:
    wikidata_id: str
    title: str
    summary: str | None  # absent for some entities
    content: str | None


_WIKIDATA_ID = re.compile(r'"wikidata_id"\s*:\s*"([^"]+)"')


def _optional_text(record: dict[str, Any], name: str) -> str | None:
    value = record.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name} is {type(value).__name__}, not a string")
    return value


def _wiki6m_entry(record: dict[str, Any]) -> tuple[list[str], Wiki6MEntity]:
    qid = record["wikidata_id"]
    if not isinstance(qid, str) or not qid:
        raise ValueError("wikidata_id missing or not a string")
    entity = Wiki6MEntity(
        wikidata_id=qid,
        title=_optional_text(record, "wikipedia_title") or "",
        summary=_optional_text(record, "wikipedia_summary"),
        content=_optional_text(record, "wikipedia_content"),
    )
    return [qid], entity


def read_wiki6m(path: Path, wanted: Collection[str]) -> KBLoad[Wiki6MEntity]:
    """Entities of ``Wiki6M_ver_1_0.jsonl(.gz)`` whose ``wikidata_id`` is in ``wanted``."""
    return _scan_jsonl(path, wanted, lambda line: set(_WIKIDATA_ID.findall(line)), _wiki6m_entry)


# --------------------------------------------------------------------------- KILT


@dataclass(frozen=True)
class KiltArticle:
    wikipedia_id: str
    title: str
    paragraphs: tuple[str, ...]


# KILT anchors also carry "wikipedia_id"/"wikipedia_title" keys: those are harmless false
# positives, the parsed top-level fields decide.
_KILT_ID = re.compile(r'"(?:kilt_id|wikipedia_id)"\s*:\s*"?([^",}\s]+)')
_KILT_TITLE = re.compile(r'"wikipedia_title"\s*:\s*("(?:[^"\\]|\\.)*")')


def title_key(title: str) -> str:
    """How articles are matched by title: case- and whitespace-insensitive."""
    return "title:" + " ".join(title.split()).casefold()


def _kilt_candidates(line: str) -> set[str]:
    found = set(_KILT_ID.findall(line))
    for quoted in _KILT_TITLE.findall(line):
        try:
            found.add(title_key(json.loads(quoted)))
        except ValueError:
            continue
    return found


def _kilt_entry(record: dict[str, Any]) -> tuple[list[str], KiltArticle]:
    ids = [str(record[k]) for k in ("kilt_id", "wikipedia_id") if record.get(k) not in (None, "")]
    if not ids:
        raise ValueError("neither kilt_id nor wikipedia_id")
    title = record.get("wikipedia_title") or ""
    if not isinstance(title, str):
        raise ValueError("wikipedia_title is not a string")
    text = record.get("text")
    # KILT ships text as a list of paragraphs; the ViQuAE KB (a datasets export) nests
    # them as {"paragraph": [...]}.
    paragraphs = text.get("paragraph") if isinstance(text, dict) else text
    if not isinstance(paragraphs, list) or not all(isinstance(p, str) for p in paragraphs):
        raise ValueError("text is neither a list of paragraphs nor {paragraph: [...]}")
    article = KiltArticle(ids[-1], title, tuple(paragraphs))
    keys = list(dict.fromkeys(ids)) + ([title_key(title)] if title else [])
    return keys, article


def read_kilt(path: Path, wanted: Collection[str]) -> KBLoad[KiltArticle]:
    """KILT-format articles (JSONL, optionally gzipped) matching ``wanted``.

    ``wanted`` holds article ids (``kilt_id`` / ``wikipedia_id`` as strings) and/or
    ``title_key(title)`` values; an article is returned under every wanted key it matches.
    """
    return _scan_jsonl(path, wanted, _kilt_candidates, _kilt_entry)


# --------------------------------------------------------------------------- JSON object members


def iter_object_members(
    path: Path,
    wanted: Collection[str] | None = None,
    chunk_chars: int = 1 << 20,
    max_value_chars: int = 1 << 30,
) -> Iterator[tuple[str, Any]]:
    """Yield ``(key, value)`` of the top-level JSON object in ``path`` without loading it.

    Only members whose key is in ``wanted`` are yielded (all when ``wanted`` is None); the
    read stops once every wanted key was seen. The members come from
    ``json_members.iter_members``; a file that is not one JSON object raises
    ``SourceError`` naming the file and the character offset.
    """
    remaining = None if wanted is None else set(wanted)
    if remaining is not None and not remaining:
        return
    where = path.name
    try:
        for key, value in iter_members(path, chunk=chunk_chars, max_member=max_value_chars):
            if remaining is None or key in remaining:
                yield key, value
                if remaining is not None:
                    remaining.discard(key)
                    if not remaining:
                        return
    except JsonMembersError as exc:
        if exc.detail is not None:  # the decoder rejected a value
            raise SourceError(f"{where}: invalid JSON at character {exc.offset}: {exc.detail}") from None
        raise SourceError(f"{where}: {exc}") from None


# --------------------------------------------------------------------------- Encyclopedic-VQA


@dataclass(frozen=True)
class EncyclopedicArticle:
    url: str
    title: str
    section_titles: tuple[str, ...]
    section_texts: tuple[str, ...]


def read_encyclopedic_kb(path: Path, wanted: Collection[str]) -> KBLoad[EncyclopedicArticle]:
    """Articles of ``encyclopedic_kb_wiki.json`` (url -> article) whose url is wanted."""
    result: KBLoad[EncyclopedicArticle] = KBLoad()
    for url, value in iter_object_members(path, wanted):
        if isinstance(value, Unreadable):
            result.problems.append(Rejected(f"{path.name}:{url}", f"unreadable KB entry: {value.reason}"))
            continue
        try:
            if not isinstance(value, dict):
                raise ValueError(f"expected an object, got {type(value).__name__}")
            titles, texts = value.get("section_titles") or [], value.get("section_texts")
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                raise ValueError("section_texts is not a list of strings")
            result.entries[url] = EncyclopedicArticle(
                url=url,
                title=str(value.get("title") or ""),
                section_titles=tuple(str(t) for t in titles),
                section_texts=tuple(texts),
            )
        except ValueError as exc:
            result.problems.append(
                Rejected(f"{path.name}:{url}", f"unreadable KB entry: {exc}", json.dumps(value)[:2000])
            )
    return result


# --------------------------------------------------------------------------- passages


def word_window(text: str, at: int, words: int) -> tuple[int, str]:
    """At most ``words`` words of ``text`` centred on character ``at``.

    Returns ``(index of the first word, passage)``; the passage keeps the original
    whitespace between its words.
    """
    spans = [m.span() for m in re.finditer(r"\S+", text)]
    if not spans:
        return 0, ""
    centre = next((i for i, (_, end) in enumerate(spans) if end > at), len(spans) - 1)
    start = max(0, min(centre - words // 2, len(spans) - words))
    end = min(len(spans), start + words)
    return start, text[spans[start][0] : spans[end - 1][1]]
