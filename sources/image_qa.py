"""What the image-QA adapters of ReflectV share (GQA, TextVQA, DocVQA, ChartQA, FIRE).

Each of those sources is a list of (image, question, answers) records in its own JSON
layout; ``image_qa_sample`` checks the fields every one of them needs, stores the image
and tags the sample with its task domain (``core.domains``), and ``guarded`` turns any
problem with one record into a quarantine row at its locator, so one bad record never
stops an ingest. The record readers stream the three JSON shapes these sources publish
(one object keyed by id, one array, an object whose ``data`` member is the array, read
item by item) and yield ``(locator, record)`` or the rejection of a record that is not a
JSON object (or is nested too deeply to decode). A file that holds no such container at
all is one rejection located at the bare file.

``SplitQuestionsSource`` is the whole adapter of a source published as one ``data`` file
per split (TextVQA, DocVQA): a subclass names its splits, the file of a split and how one
record becomes a sample.

A record without answers in a split its source publishes without answers (GQA's test and
challenge questions, TextVQA's and DocVQA's test splits) is ``unlabelled``: the adapter
counts it under ``skipped`` (``SourceAdapter.skip_unlabelled``), the one rule InfoSeek's
test split follows too, instead of quarantining each record.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar, Literal

from mmcurate.core.domains import DOMAINS
from mmcurate.core.errors import ImageRejected
from mmcurate.core.images import ImageStore
from mmcurate.core.records import Rejected, Sample

from .base import AdapterOptions, Located, SourceAdapter
from .json_members import JsonMembersError, NotContainer, Unreadable, iter_items, iter_member_items, iter_members

Record = tuple[str, dict[str, Any]]  # (locator, raw record)
Split = Literal["train", "val", "test"]


def answers_by_frequency(answers: Iterable[Any]) -> list[str]:
    """Distinct non-empty answers, most often given first (ties in first-seen order):
    several annotators' answers become one gold list with the consensus first."""
    cleaned = [str(a).strip() for a in answers if isinstance(a, (str, int, float)) and str(a).strip()]
    counts = Counter(cleaned)
    return sorted(dict.fromkeys(cleaned), key=lambda a: -counts[a])


def image_qa_sample(
    store: ImageStore,
    source: str,
    source_id: str,
    question: str,
    answers: list[str],
    image_root: Path,
    image: str,
    domain: str,
    meta: dict[str, Any],
) -> Sample:
    """One ReflectV candidate: the question, its answers, the stored image, the domain tag."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}")
    if not answers:
        raise ValueError("answers are empty")
    sha = store.put_file(image_root, image)
    return Sample(source, source_id, question, answers, images=[sha], meta={**meta, "domain": domain, "image": image})


def guarded(locator: str, raw: Any, make: Callable[..., Sample], *args: Any) -> Located | Rejected:
    """``make(*args)`` with its locator, or the quarantine row of the record when it cannot become a sample."""
    try:
        return Located(locator, make(*args))
    except ImageRejected as exc:  # before ValueError: it is one
        return Rejected(locator, str(exc), _raw(raw))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        return Rejected(locator, f"malformed record: {exc}", _raw(raw))


def _raw(raw: Any) -> str:
    return raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, default=str)


def unlabelled(record: dict[str, Any], field: str, split: str, splits: tuple[str, ...]) -> bool:
    """Whether ``record`` lacks its ``field`` of answers because ``split`` is one its source
    publishes without answers (then it is skipped, not quarantined: see the module docstring)."""
    return split in splits and record.get(field) is None


def _objects(path: Path, items: Iterable[tuple[str, Any]]) -> Iterator[Record | Rejected]:
    try:
        for key, value in items:
            locator = f"{path.name}:{key}"
            if isinstance(value, dict):
                yield locator, value
            elif isinstance(value, Unreadable):
                yield Rejected(locator, f"malformed record: {value.reason}")
            else:
                yield Rejected(
                    locator, f"malformed record: expected a JSON object, got {type(value).__name__}", _raw(value)
                )
    except NotContainer as exc:  # nothing of the file is readable: the whole file is the locator
        yield Rejected(path.name, f"file unreadable: {exc}")
    except JsonMembersError as exc:
        yield Rejected(f"{path.name}:char{exc.offset}", f"rest of file unreadable: {exc}")


def count_objects(records: Iterable[Record | Rejected]) -> int:
    """How many records a reader yields that are JSON objects (``count_records``: read, not built)."""
    return sum(1 for item in records if not isinstance(item, Rejected))


def keyed_records(path: Path) -> Iterator[Record | Rejected]:
    """The members of a file that is one JSON object (id -> record), located ``file:<id>``."""
    return _objects(path, ((str(k), v) for k, v in iter_members(path)))


def array_records(path: Path) -> Iterator[Record | Rejected]:
    """The items of a file that is one JSON array, located ``file:<index>``."""
    return _objects(path, ((str(i), v) for i, v in iter_items(path)))


def data_records(path: Path) -> Iterator[Record | Rejected]:
    """The items of the ``data`` array of a file ``{..., "data": [...]}``, item by item,
    located ``file:data[<index>]``."""
    return _objects(path, ((f"data[{i}]", v) for i, v in iter_member_items(path, "data")))


class SplitOptions(AdapterOptions):
    splits: list[Split] | None = None  # None: every split whose questions file is present


class SplitQuestionsSource(SourceAdapter):
    """An image-QA source published as one ``{..., "data": [...]}`` questions file per split:
    the files of the chosen splits (``split_files``), read item by item (``data_records``); a
    record without ``answers`` in a split of ``UNLABELLED`` is skipped (``unlabelled``), any
    other bad record is quarantined (``guarded``)."""

    Options = SplitOptions
    options: SplitOptions
    SPLITS: ClassVar[tuple[Split, ...]] = ("train", "val", "test")
    UNLABELLED: ClassVar[tuple[Split, ...]] = ("test",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.files = self.split_files(self.options.splits, self.SPLITS, self.questions_file)

    @abstractmethod
    def questions_file(self, split: str) -> str:
        """The name of ``split``'s questions file under the root."""

    @abstractmethod
    def sample(self, split: str, record: dict[str, Any]) -> Sample:
        """The sample of one record (ValueError, TypeError, KeyError: quarantined)."""

    def count_records(self) -> int:
        return sum(count_objects(data_records(path)) for path in self.files.values())

    def source_files(self) -> list[Path]:
        return list(self.files.values())

    def records(self) -> Iterator[Located | Rejected]:
        for split, path in self.files.items():
            for item in data_records(path):
                if isinstance(item, Rejected):
                    yield item
                elif unlabelled(item[1], "answers", split, self.UNLABELLED):
                    self.skip_unlabelled(split)
                else:
                    yield guarded(*item, self.sample, split, item[1])
