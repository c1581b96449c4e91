"""GQA: compositional questions about real photographs (ReflectV's General QA domain).

Layout read (GQA 1.2, ``questions1.2.zip`` and ``images.zip`` from
https://cs.stanford.edu/people/dorarad/gqa/download.html):

- ``ROOT/<split>_balanced_questions.json`` (or ``<split>_all_questions.json``): ONE JSON
  object mapping each question id to ``{"imageId", "question", "answer", "fullAnswer",
  ...}`` (keys as read by github.com/ammarhusain/lxmert,
  ``data/gqa/process_raw_data_scripts/process_data.py``). The train file is about 1 GB, so
  it is streamed member by member (``json_members.iter_members``).
- ``ROOT/images/<imageId>.jpg`` (the image folder of ``images.zip``).

``answer`` is the short answer; ``fullAnswer`` (a sentence) is kept in meta. The test,
challenge and submission question files are published without answers (the download
page's ``questions1.2.zip`` lists them as questions only): their records are counted under
``skipped`` as unlabelled (``image_qa``), not quarantined; a record without an answer in
any other split is quarantined (``missing field answer``). Every sample is tagged General QA.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mmcurate.core.domains import GENERAL_QA
from mmcurate.core.records import Rejected, Sample

from .base import AdapterOptions, Located, SourceAdapter, text_field
from .image_qa import count_objects, guarded, image_qa_sample, keyed_records, unlabelled

PATTERNS = ("*_balanced_questions.json", "*_all_questions.json")
UNLABELLED = ("test", "challenge", "submission")  # question files published without answers


class GQAOptions(AdapterOptions):
    files: list[str] | None = None  # question files under root; None: every *_balanced/_all_questions.json


class GQASource(SourceAdapter):
    name = "gqa"
    Options = GQAOptions
    options: GQAOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.files = self.listed_files(self.options.files, PATTERNS)
        self.image_dir = self.images or self.root / "images"

    def count_records(self) -> int:
        return sum(count_objects(keyed_records(path)) for path in self.files)

    def source_files(self) -> list[Path]:
        return list(self.files)

    def records(self) -> Iterator[Located | Rejected]:
        for path in self.files:
            split = path.name.split("_", 1)[0]
            for item in keyed_records(path):
                if isinstance(item, Rejected):
                    yield item
                else:
                    locator, record = item
                    if unlabelled(record, "answer", split, UNLABELLED):
                        self.skip_unlabelled(split)
                        continue
                    key = locator[len(path.name) + 1 :]
                    yield guarded(locator, record, self._sample, split, key, record)

    def _sample(self, split: str, key: str, record: dict[str, Any]) -> Sample:
        image_id = text_field(record, "imageId", numbers=True)
        question = text_field(record, "question")
        answer = text_field(record, "answer", numbers=True)
        meta = {"split": split, "image_id": image_id, "full_answer": record.get("fullAnswer")}
        return image_qa_sample(
            self.store, self.name, key, question, [answer], self.image_dir, f"{image_id}.jpg", GENERAL_QA, meta
        )
