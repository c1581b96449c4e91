"""WebQA: text-only questions whose gold and distractor facts are web snippets and images.

Reads ``WebQA_train_val.json`` (one object keyed by Guid, parsed member by member) and the
image store ``imgs.tsv`` (``image_id<TAB>base64 jpeg`` rows) through ``imgs.lineidx``
(one byte offset per line, indexed by ``int(image_id) % 10000000``).

A fact that cannot be used (missing image, truncated JPEG, wrong row, offset past the
file, missing fields) is dropped from its sample with one quarantine row naming the fact;
dropped gold facts are also listed in ``meta["dropped_gold"]`` so later stages can tell
a sample lost evidence. A sample left with no gold fact is quarantined whole.

``WebQA_test.json`` is unlabelled (``txt_Facts`` / ``img_Facts``, no answers): it is skipped
unless ``include_test`` is set, and then its samples have no answers, no gold and no
negatives; their candidate facts are listed in ``meta["candidate_contexts"]``.
"""

from __future__ import annotations

import base64
import binascii
import json
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from mmcurate.core.errors import ImageRejected, SourceError
from mmcurate.core.records import Context, Rejected, Sample

from .base import AdapterOptions, Located, SourceAdapter, required, text_field
from .json_members import JsonMembersError, NotContainer, Unreadable, iter_members

TRAIN_VAL = "WebQA_train_val.json"
TEST = "WebQA_test.json"
LINE_MODULUS = 10_000_000


class WebQAOptions(AdapterOptions):
    splits: list[str] = ["train", "val"]  # values of a record's "split" to keep
    qcate: list[str] | None = None  # keep only these Qcate values; None keeps all
    include_test: bool = False  # also ingest the unlabelled WebQA_test.json


def strip_quotes(text: str) -> str:
    """Remove one pair of literal double quotes wrapping ``text`` (WebQA wraps Q and A)."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1].strip()
    return text


class FactError(ValueError):
    """One fact of a record is unusable; the message says why."""


class ImageTable:
    """Random access to ``imgs.tsv`` rows by image id through ``imgs.lineidx``."""

    def __init__(self, tsv: Path, lineidx: Path) -> None:
        self.tsv = tsv
        self.lineidx = lineidx
        self._size = tsv.stat().st_size
        self._offsets: array | None = None
        self._handle: IO[bytes] | None = None

    def _load(self) -> array:
        if self._offsets is None:
            offsets = array("q")
            with open(self.lineidx, encoding="ascii") as handle:
                for number, line in enumerate(handle, start=1):
                    try:
                        offsets.append(int(line))
                    except ValueError:
                        raise SourceError(f"webqa: {self.lineidx.name}:{number} is not a byte offset") from None
            self._offsets = offsets
            self._handle = open(self.tsv, "rb")
        return self._offsets

    def jpeg(self, image_id: int) -> bytes:
        """The decoded bytes of ``image_id``'s row; FactError if the row is unusable."""
        offsets = self._load()
        line = image_id % LINE_MODULUS
        if line >= len(offsets):
            raise FactError(f"image_id {image_id} has no line {line} in imgs.lineidx ({len(offsets)} lines)")
        offset = offsets[line]
        if not 0 <= offset < self._size:
            raise FactError(
                f"imgs.lineidx offset {offset} for image_id {image_id} points past imgs.tsv ({self._size} bytes)"
            )
        assert self._handle is not None
        self._handle.seek(offset)
        row = self._handle.readline().rstrip(b"\r\n")
        found, sep, payload = row.partition(b"\t")
        if not sep:
            raise FactError(f"imgs.tsv row at offset {offset} has no tab-separated image")
        found_id = found.decode("ascii", "replace").strip()
        if found_id != str(image_id):
            raise FactError(f"imgs.tsv row at offset {offset} holds image_id {found_id}, expected {image_id}")
        try:
            return base64.b64decode(payload, validate=True)
        except binascii.Error as exc:
            raise FactError(f"image_id {image_id}: invalid base64 in imgs.tsv ({exc})") from None

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()


class WebQASource(SourceAdapter):
    name = "webqa"
    Options = WebQAOptions
    options: WebQAOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.train_val = self.require(TRAIN_VAL)
        self.test = self.root / TEST if self.options.include_test else None
        if self.test is not None and not self.test.is_file():
            raise SourceError(f"webqa: include_test is set but {TEST} is missing under {self.root}")
        self.tsv = self.require("imgs.tsv")
        self.lineidx = self.require("imgs.lineidx")
        self._image_cache: dict[int, str | FactError] = {}

    def source_files(self) -> list[Path]:
        files = [self.train_val, self.tsv, self.lineidx]
        return files + ([self.test] if self.test is not None else [])

    def count_records(self) -> int:
        """Records of the wanted splits in the train/val file (members are parsed, images are not read)."""
        count = 0
        try:
            for _, record in iter_members(self.train_val):
                count += (
                    not isinstance(record, dict) or not isinstance(record.get("split"), str) or self._wanted(record)
                )
        except JsonMembersError:
            pass  # the ingest quarantines the unreadable rest; the count stops there too
        return count

    def records(self) -> Iterator[Located | Rejected]:
        images = ImageTable(self.tsv, self.lineidx)
        try:
            yield from self._file(self.train_val, images, labelled=True)
            if self.test is not None:
                yield from self._file(self.test, images, labelled=False)
        finally:
            images.close()

    def _file(self, path: Path, images: ImageTable, labelled: bool) -> Iterator[Located | Rejected]:
        members = iter_members(path)
        while True:
            try:
                guid, record = next(members)
            except StopIteration:
                return
            except NotContainer as exc:  # nothing of the file is readable: the whole file is the locator
                yield Rejected(path.name, f"malformed JSON, file unreadable: {exc}")
                return
            except JsonMembersError as exc:  # the rest of the object cannot be located
                yield Rejected(f"{path.name}:char{exc.offset}", f"malformed JSON, rest of file unreadable: {exc}")
                return
            locator = f"{path.name}:{guid}"
            if isinstance(record, Unreadable):
                yield Rejected(locator, f"malformed record: {record.reason}")
                continue
            if not isinstance(record, dict):
                yield Rejected(locator, f"record is a {type(record).__name__}, not an object", json.dumps(record))
                continue
            if labelled and not isinstance(record.get("split"), str):
                yield Rejected(locator, "record has no split", json.dumps(record, ensure_ascii=False))
                continue
            if labelled and not self._wanted(record):
                self.skipped["out_of_scope"] += 1  # split/qcate options: counted, not an error
                continue
            yield from self._record(guid, record, locator, images, labelled)

    def _wanted(self, record: dict[str, Any]) -> bool:
        """Option filters; records outside them are out of scope, not bad input."""
        if record.get("split") not in self.options.splits:
            return False
        return self.options.qcate is None or record.get("Qcate") in self.options.qcate

    def _record(
        self, guid: str, record: dict[str, Any], locator: str, images: ImageTable, labelled: bool
    ) -> Iterator[Located | Rejected]:
        raw = json.dumps(record, ensure_ascii=False)
        try:
            question = strip_quotes(text_field(record, "Q"))
            if not question:
                raise ValueError("Q is empty")
            answers = required(record, "A") if labelled else []
        except ValueError as exc:
            yield Rejected(locator, str(exc), raw)
            return
        if isinstance(answers, str):
            answers = [answers]
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            yield Rejected(locator, "A is not a list of strings", raw)
            return
        answers = [a for a in (strip_quotes(a) for a in answers) if a]
        if labelled and not answers:
            yield Rejected(locator, "A is empty", raw)
            return

        groups: dict[str, list[Context]] = {}
        dropped: list[str] = []
        keys = (
            ("txt_posFacts", "img_posFacts", "txt_negFacts", "img_negFacts") if labelled else ("txt_Facts", "img_Facts")
        )
        for key in keys:
            facts = record.get(key, [])
            if not isinstance(facts, list):
                yield Rejected(locator, f"{key} is not a list", raw)
                return
            groups[key] = []
            for k, fact in enumerate(facts):
                try:
                    groups[key].append(self._fact(key, fact, images))
                except FactError as exc:
                    yield Rejected(locator, f"dropped {key}[{k}]: {exc}", json.dumps(fact, ensure_ascii=False))
                    if "posFacts" in key:
                        dropped.append(f"{key}[{k}]")

        meta: dict[str, Any] = {
            "Qcate": record.get("Qcate"),
            "topic": record.get("topic"),
            "split": record.get("split", "test" if not labelled else None),
        }
        if "Keywords_A" in record:
            meta["Keywords_A"] = record["Keywords_A"]
        if labelled:
            gold = groups["txt_posFacts"] + groups["img_posFacts"]
            if not gold:
                yield Rejected(locator, "no usable gold fact (txt_posFacts/img_posFacts)", raw)
                return
            negatives = groups["txt_negFacts"] + groups["img_negFacts"]
            if dropped:
                meta["dropped_gold"] = dropped
        else:
            gold, negatives = [], []
            meta["candidate_contexts"] = [c.to_row() for c in groups["txt_Facts"] + groups["img_Facts"]]
        yield Located(
            locator,
            Sample(
                source=self.name,
                source_id=guid,
                question=question,
                answers=answers,
                images=[],
                gold_contexts=gold,
                negative_contexts=negatives,
                meta=meta,
            ),
        )

    def _fact(self, key: str, fact: Any, images: ImageTable) -> Context:
        if not isinstance(fact, dict):
            raise FactError(f"fact is a {type(fact).__name__}, not an object")
        title = fact.get("title") if isinstance(fact.get("title"), str) else None
        if key.startswith("txt_"):
            text, snippet = fact.get("fact"), fact.get("snippet_id")
            if not isinstance(text, str) or not text.strip() or not snippet:
                raise FactError("text fact without fact text or snippet_id")
            return Context(f"webqa:txt:{snippet}", "text", text=text, title=title)
        image_id = fact.get("image_id")
        try:
            image_id = int(image_id)  # type: ignore[arg-type]  # None raises TypeError, caught below
        except (TypeError, ValueError, OverflowError):  # OverflowError: 1e999 parses as inf
            raise FactError(f"image fact with image_id {image_id!r}, not an integer") from None
        caption = fact.get("caption")
        sha = self._image(image_id, images)
        return Context(
            f"webqa:img:{image_id}", "image", text=caption if isinstance(caption, str) else None, image=sha, title=title
        )

    def _image(self, image_id: int, images: ImageTable) -> str:
        """Store ``image_id``'s JPEG once; remember failures so each use reports the same reason."""
        cached = self._image_cache.get(image_id)
        if cached is None:
            try:
                cached = self.store.put(images.jpeg(image_id))
            except FactError as exc:
                cached = exc
            except ImageRejected as exc:
                cached = FactError(f"image_id {image_id}: {exc}")
            self._image_cache[image_id] = cached
        if isinstance(cached, FactError):
            raise cached
        return cached
