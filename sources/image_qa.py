"""What the image-QA adapters of ReflectV share (GQA, TextVQA, DocVQA, ChartQA, FIRE).

Each of those sources is a list of (image, question, answers) records in its own JSON
layout; ``image_qa_sample`` checks the fields every one of them needs, stores the image
and tags the sample with its task domain (``core.domains``), and ``guarded`` turns any
problem with one record into a quarantine row at its locator, so one bad record never
stops an ingest. The record readers stream the three JSON shapes these sources publish
(one object keyed by id, one array, an object whose ``data`` member is the array) and
yield ``(locator, record)`` or the rejection of a record that is not a JSON object.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from mmcurate.core.domains import DOMAINS
from mmcurate.core.errors import ImageRejected
from mmcurate.core.images import ImageStore
from mmcurate.core.records import Rejected, Sample

from .base import Located

from .json_members import JsonMembersError, iter_items, iter_members

Record = tuple[str, dict[str, Any]]  # (locator, raw record)


def text_field(record: dict[str, Any], name: str) -> str:
    """A non-empty string field of ``record`` (stripped), or ValueError naming it."""
    value = record.get(name)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"missing field {name}")
    return value.strip()


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
        raise ValueError("no answer")
    sha = store.put_file(image_root, image)
    return Sample(source, source_id, question, answers, images=[sha],
                  meta={**meta, "domain": domain, "image": image})


def guarded(locator: str, raw: Any, make: Callable[[], Sample]) -> Located | Rejected:
    """``make()`` with its locator, or the quarantine row of the record when it cannot become a sample."""
    try:
        return Located(locator, make())
    except ImageRejected as exc:  # before ValueError: it is one
        return Rejected(locator, str(exc), _raw(raw))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        return Rejected(locator, f"malformed record: {exc}", _raw(raw))


def _raw(raw: Any) -> str:
    return raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, default=str)


def _objects(path: Path, items: Iterable[tuple[str, Any]]) -> Iterator[Record | Rejected]:
    try:
        for key, value in items:
            locator = f"{path.name}:{key}"
            if isinstance(value, dict):
                yield locator, value
            else:
                yield Rejected(locator, f"malformed record: expected a JSON object, got {type(value).__name__}",
                               _raw(value))
    except JsonMembersError as exc:
        yield Rejected(f"{path.name}:char{exc.offset}", f"rest of file unreadable: {exc}")


def keyed_records(path: Path) -> Iterator[Record | Rejected]:
    """The members of a file that is one JSON object (id -> record), located ``file:<id>``."""
    return _objects(path, ((str(k), v) for k, v in iter_members(path)))


def array_records(path: Path) -> Iterator[Record | Rejected]:
    """The items of a file that is one JSON array, located ``file:<index>``."""
    return _objects(path, ((str(i), v) for i, v in iter_items(path)))


def data_records(path: Path) -> Iterator[Record | Rejected]:
    """The items of the ``data`` array of a file ``{..., "data": [...]}``, located ``file:data[<index>]``."""
    def items() -> Iterator[tuple[str, Any]]:
        for key, value in iter_members(path):
            if key != "data":
                continue
            if not isinstance(value, list):
                raise JsonMembersError("member data is not a list", 0)
            yield from ((f"data[{i}]", v) for i, v in enumerate(value))

    return _objects(path, items())
