"""TextVQA: questions that need reading the text in a photograph (ReflectV's Scene text domain).

Layout read (the files of https://textvqa.org/dataset, served from
``dl.fbaipublicfiles.com/textvqa/``):

- ``ROOT/TextVQA_0.5.1_<split>.json``: ``{"dataset_type", "dataset_name",
  "dataset_version", "data": [...]}``, each item with ``question_id``, ``question``,
  ``image_id`` and, outside the test split, ``answers`` (ten annotators' answers). Fields
  as read by github.com/chu0802/MLLM-playground, ``src/datasets/vqa/text_vqa.py``, and
  github.com/yourtone/concept_vqa, ``get_ori_data_TVQA2VQA.py``.
- ``ROOT/train_images/<image_id>.jpg`` for train and val, ``ROOT/test_images/`` for test
  (same reader).

The ten answers become one gold list, the most frequent first (``answers_by_frequency``;
the raw list stays in meta). The test split is published without answers: its records are
counted under ``skipped`` as unlabelled (``image_qa``), not quarantined.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmcurate.core.domains import SCENE_TEXT
from mmcurate.core.records import Sample

from .base import required, text_field
from .image_qa import SplitQuestionsSource, answers_by_frequency, image_qa_sample

VERSION = "0.5.1"


class TextVQASource(SplitQuestionsSource):
    name = "textvqa"

    def questions_file(self, split: str) -> str:
        return f"TextVQA_{VERSION}_{split}.json"

    def image_dir(self, split: str) -> Path:
        return self.images or self.root / ("test_images" if split == "test" else "train_images")

    def sample(self, split: str, record: dict[str, Any]) -> Sample:
        question_id = text_field(record, "question_id", numbers=True)
        image_id = text_field(record, "image_id", numbers=True)
        question = text_field(record, "question")
        raw = required(record, "answers")
        if not isinstance(raw, list):
            raise ValueError("answers is not a list")
        meta = {"split": split, "image_id": image_id, "annotator_answers": raw}
        return image_qa_sample(
            self.store,
            self.name,
            question_id,
            question,
            answers_by_frequency(raw),
            self.image_dir(split),
            f"{image_id}.jpg",
            SCENE_TEXT,
            meta,
        )
