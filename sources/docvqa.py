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

from typing import Any

from mmcurate.core.domains import DOCUMENT
from mmcurate.core.records import Sample

from .base import required, text_field
from .image_qa import SplitQuestionsSource, answers_by_frequency, image_qa_sample


class DocVQASource(SplitQuestionsSource):
    name = "docvqa"

    def questions_file(self, split: str) -> str:
        return f"{split}_v1.0.json"

    def sample(self, split: str, record: dict[str, Any]) -> Sample:
        question_id = text_field(record, "questionId", numbers=True)
        question = text_field(record, "question")
        image = text_field(record, "image")
        raw = required(record, "answers")
        if not isinstance(raw, list):
            raise ValueError("answers is not a list")
        meta = {
            "split": split,
            "doc_id": record.get("docId"),
            "ucsf_document_id": record.get("ucsf_document_id"),
            "page": record.get("ucsf_document_page_no"),
            "question_types": record.get("question_types"),
        }
        return image_qa_sample(
            self.store,
            self.name,
            question_id,
            question,
            answers_by_frequency(raw),
            self.images or self.root / split,
            image,
            DOCUMENT,
            meta,
        )
