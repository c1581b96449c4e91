"""What every raw-source adapter is: a reader that yields located samples or rejections.

An adapter never raises on one bad record: it yields ``Rejected`` with a locator and a
reason, and the ingest writes it to quarantine. It raises ``SourceError`` only when the
root as a whole is unusable (missing folder, no data files).

Every record says where it was read: ``Located.locator`` for a sample (so a sample the
ingest cannot store is quarantined at its place in the raw files), ``Rejected.locator``
for a rejection. A locator is ``<file>:<line>`` in a line-based file (JSONL, NDJSON dumps,
CSV, where a row is located at the line it ends on), ``<file>:<key>`` in a keyed one (a
member of a JSON object, the row index in a Parquet shard or a hub dataset), or
``<file>:char<N>`` where a one-object JSON file stops being readable at character N. A
problem of a whole file (a dump month without its partner, an empty, corrupt or
truncated stream) is located at the bare ``<file>``; its reason says after which line.

The shared reading steps live here so every adapter does them one way: finding the
file of each split (``split_files``), reading JSONL records with a ``file:line`` locator
(``jsonl_records``: a line longer than ``MAX_RECORD_CHARS`` is quarantined unread, a record
nested too deeply for the parser is quarantined, not a crash), reading a record's fields
with one wording of every reason (``text_field``, ``required``), and one rule for a split
published without answers (``skip_unlabelled``: counted under ``skipped`` as
``"<split>: no answers in this split: not curatable"``, never quarantined record by record).
Images go to the store through ``ImageStore.put`` / ``put_file``, whose rejection reasons
read the same in every run.
"""

from __future__ import annotations

import gzip
import json
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar, NamedTuple

from pydantic import BaseModel, ConfigDict, ValidationError

from mmcurate.core.errors import ConfigError, SourceError
from mmcurate.core.images import ImageStore
from mmcurate.core.plural import listed
from mmcurate.core.records import Rejected, Sample


class AdapterOptions(BaseModel):
    """Options an adapter accepts; subclasses add fields. Unknown keys are an error."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Located:
    """A sample, the locator of the raw record it was read from and, where the adapter holds
    it as text anyway (a JSONL line, a CSV row), that raw record for quarantine."""

    locator: str
    sample: Sample
    raw: str | None = None


MAX_RECORD_CHARS = 1 << 20  # a raw record (JSONL line) longer than this is quarantined unread, as Reddit's lines are
TOO_DEEP = "JSON nested too deeply to parse"


def parse_json(text: str) -> Any:
    """``json.loads(text)``; ValueError (never RecursionError) for a value nested deeper than
    the parser's recursion limit (about a thousand levels)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None


def no_answers(split: str) -> str:
    """The skip reason of a split published without answers (questions only): one wording for
    every source, counted once per split in the ingest summary and on the console."""
    return f"{split}: no answers in this split: not curatable"


def required(record: dict[str, Any], name: str) -> Any:
    """``record[name]``, or ValueError ``missing field <name>`` when it is absent or null."""
    value = record.get(name)
    if value is None:
        raise ValueError(f"missing field {name}")
    return value


def text_field(record: dict[str, Any], name: str, numbers: bool = False) -> str:
    """A non-empty string field of ``record`` (stripped). Absent or null: ``missing field
    <name>``; another type: ``<name> is not a string`` (a number is taken as its text when
    ``numbers``, e.g. a numeric answer or id); blank: ``<name> is empty``."""
    value = required(record, name)
    if numbers and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError(f"{name} is not a string")
    if not value.strip():
        raise ValueError(f"{name} is empty")
    return value.strip()


class JsonLine(NamedTuple):
    """One JSON object read from a JSONL file."""

    locator: str  # "<file>:<line>"
    record: dict[str, Any]
    raw: str  # the line as read, for quarantine


def open_text(path: Path) -> IO[str]:
    """Open a UTF-8 text file (a leading BOM is dropped), transparently gunzipping ``*.gz``.

    Invalid UTF-8 never stops a read: such bytes decode to lone surrogates, so the line
    still parses and the record holding them is quarantined when it is stored.
    """
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8-sig", errors="surrogateescape")
    return open(path, encoding="utf-8-sig", errors="surrogateescape")


def count_lines(path: Path) -> int:
    """Non-blank lines of a (gzipped) text file: the raw records of a JSONL file, unparsed."""
    with open_text(path) as handle:
        return sum(1 for line in handle if line.strip())


def _bounded_lines(handle: IO[str], limit: int) -> Iterator[tuple[str | None, int]]:
    """``(line, length)`` of each line; a line longer than ``limit`` characters (newline
    excluded) comes as ``(None, length)`` and is never held whole in memory."""
    while True:
        line = handle.readline(limit + 2)
        if not line:
            return
        content = line.rstrip("\r\n")
        if len(content) <= limit:
            yield line, len(content)
            continue
        length = len(content)
        while not line.endswith("\n"):
            line = handle.readline(limit)
            if not line:
                break
            length += len(line.rstrip("\r\n"))
        yield None, length


def jsonl_records(
    path: Path,
    what: str = "malformed record",
    keep: Callable[[str], bool] | None = None,
    max_chars: int = MAX_RECORD_CHARS,
) -> Generator[JsonLine | Rejected, None, None]:
    """Every non-blank line of a (gzipped) JSONL file as a JSON object, or a rejection
    ``"<what>: <why>"`` located at its ``file:line`` (a line longer than ``max_chars``
    characters is rejected unread: ``line longer than <max_chars> characters (<length>)``).

    ``keep`` is a cheap test of the raw line: lines it refuses are neither parsed nor
    reported (a knowledge base read for a few ids skips the rest this way).
    """
    with open_text(path) as handle:
        for number, (line, length) in enumerate(_bounded_lines(handle, max_chars), start=1):
            locator = f"{path.name}:{number}"
            if line is None:
                yield Rejected(locator, f"line longer than {max_chars} characters ({length})")
                continue
            line, raw = line.rstrip("\r\n"), line.strip()
            if not raw or (keep is not None and not keep(line)):
                continue
            try:
                record = parse_json(line)
            except ValueError as exc:
                yield Rejected(locator, f"{what}: {exc}", raw)
                continue
            if isinstance(record, dict):
                yield JsonLine(locator, record, raw)
            else:
                yield Rejected(locator, f"{what}: expected a JSON object, got {type(record).__name__}", raw)


class SourceAdapter(ABC):
    name: ClassVar[str]
    Options: ClassVar[type[AdapterOptions]] = AdapterOptions

    def __init__(
        self,
        root: Path | str,
        store: ImageStore,
        images: Path | str | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise SourceError(f"{self.name}: source root {self.root} is not a readable directory")
        self.store = store
        # records that are not errors but not samples either (e.g. a Reddit post that is not
        # a question), counted per reason for the funnel; errors go to quarantine instead
        self.skipped: Counter[str] = Counter()
        self.images = Path(images) if images is not None else None
        if self.images is not None and not self.images.is_dir():
            raise SourceError(f"{self.name}: image folder {self.images} is not a readable directory")
        try:
            self.options = self.Options(**(options or {}))
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ConfigError(f"{self.name} option {'.'.join(map(str, first['loc']))}: {first['msg']}") from None

    @abstractmethod
    def records(self) -> Iterator[Located | Rejected]:
        """Yield one ``Located`` sample or ``Rejected`` per raw record, streaming."""

    @abstractmethod
    def source_files(self) -> list[Path]:
        """The raw files this adapter reads (for manifests: sha256 and provenance)."""

    @classmethod
    def parts(cls, root: Path, options: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """Independent parts of ``root`` to ingest apart, e.g. in parallel: each part's key and
        the options that ingest only it. Merged in this order (``sources.ingest.merge_ingests``)
        they give the same result as one ingest of the whole. Empty: the source is one part."""
        return []

    def reading(self) -> dict[str, str]:
        """How the files were read where an install can differ (the Reddit reader's line
        picker: ``{"line_picker": "c"}``), for ``ingest.json``; the output does not differ."""
        return {}

    def skip_unlabelled(self, split: str) -> None:
        """Count one record of ``split``, a split published without answers, as skipped
        (``no_answers``): not curatable, and not bad input."""
        self.skipped[no_answers(split)] += 1

    def count_records(self) -> int | None:
        """How many raw records the root holds, counted without building samples (an upper
        bound on the samples an ingest yields, for ``mmcurate plan``); None when no cheap
        count exists for the layout."""
        return None

    def require(self, *candidates: str) -> Path:
        """The first existing file among ``candidates`` under root, or SourceError naming them."""
        for candidate in candidates:
            path = self.root / candidate
            if path.is_file():
                return path
        raise SourceError(f"{self.name}: none of {', '.join(candidates)} found under {self.root}")

    def listed_files(self, chosen: Sequence[str] | None, patterns: Sequence[str]) -> list[Path]:
        """The ``chosen`` files under root (each must exist), or with ``chosen`` None every file
        matching one of ``patterns`` (one at least), sorted."""
        if chosen is not None:
            return [self.require(name) for name in chosen]
        found = sorted({p for pattern in patterns for p in self.root.glob(pattern)})
        if not found:
            raise SourceError(f"{self.name}: no {' or '.join(patterns)} under {self.root}")
        return found

    def split_files(
        self,
        chosen: Sequence[str] | None,
        known: Sequence[str],
        filename: Callable[[str], str],
        folder: Path | None = None,
    ) -> dict[str, Path]:
        """The file of each split, in order: of every ``chosen`` split (each must exist),
        or with ``chosen`` None of every ``known`` split whose file is present (one at least)."""
        folder = folder or self.root
        if chosen is None:
            found = {s: folder / filename(s) for s in known if (folder / filename(s)).is_file()}
            if not found:
                names = ", ".join(filename(s) for s in known)
                raise SourceError(f"{self.name}: none of {names} found under {folder}")
            return found
        paths = {s: folder / filename(s) for s in dict.fromkeys(chosen)}
        missing = [path.name for path in paths.values() if not path.is_file()]
        if missing:
            raise SourceError(f"{self.name}: {listed(missing)} missing under {folder}")
        return paths
