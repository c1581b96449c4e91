"""DocVQA (single page): questions about scanned document pages (ReflectV's Document domain).

Layout read (the ``spdocvqa`` release of https://rrc.cvc.uab.es/?ch=17, version 1.0):

- ``ROOT/<split>_v1.0.json``: ``{"dataset_name", "dataset_split", "dataset_version",
  "data": [...]}``, each item with ``questionId``, ``question``, ``image`` (a path such as
  ``documents/xnbl0037_1.png``), ``docId``, ``ucsf_document_id``,
  ``ucsf_document_page_no``, ``question_types`` and, outside the test split, ``answers``;
- the page images at ``ROOT/<split>/<image>``.

Both as read by github.com/chu0802/MLLM-playground, ``src/datasets/vqa/doc_vqa.py``
(``{split}_v1.0.json``, ``data``, ``data_root / split / d["image"]``). The test split is
published without answers: its records are counted under ``skipped`` as unlabelled
(``image_qa``), not quarantined.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from mmcurate.core.domains import DOCUMENT
from mmcurate.core.records import Rejected, Sample

from .base import AdapterOptions, Located, SourceAdapter, required, text_field
from .image_qa import answers_by_frequency, count_objects, data_records, guarded, image_qa_sample, unlabelled

Split = Literal["train", "val", "test"]
SPLITS: tuple[Split, ...] = ("train", "val", "test")
UNLABELLED = ("test",)


def questions_file(split: str) -> str:
    return f"{split}_v1.0.json"


class DocVQAOptions(AdapterOptions):
    splits: list[Split] | None = None  # None: every split whose questions file is present


class DocVQASource(SourceAdapter):
    name = "docvqa"
    Options = DocVQAOptions
    options: DocVQAOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.files = self.split_files(self.options.splits, SPLITS, questions_file)

    def count_records(self) -> int:
        return sum(count_objects(data_records(path)) for path in self.files.values())

    def source_files(self) -> list[Path]:
        return list(self.files.values())

    def records(self) -> Iterator[Located | Rejected]:
        for split, path in self.files.items():
            for item in data_records(path):
                if isinstance(item, Rejected):
                    yield item
                elif unlabelled(item[1], "answers", split, UNLABELLED):
                    self.skip_unlabelled(split)
                else:
                    yield guarded(*item, lambda: self._sample(split, item[1]))

    def _sample(self, split: str, record: dict[str, Any]) -> Sample:
        question_id = text_field(record, "questionId", numbers=True)
        question = text_field(record, "question")
        image = text_field(record, "image")
        raw = required(record, "answers")
        if not isinstance(raw, list):
            raise ValueError("answers is not a list")
        meta = {"split": split, "doc_id": record.get("docId"), "ucsf_document_id": record.get("ucsf_document_id"),
                "page": record.get("ucsf_document_page_no"), "question_types": record.get("question_types")}
        return image_qa_sample(self.store, self.name, question_id, question, answers_by_frequency(raw),
                               self.images or self.root / split, image, DOCUMENT, meta)
