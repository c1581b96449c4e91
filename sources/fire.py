"""FIRE: ready-made student-teacher feedback dialogues about images (the dialogues ReflectV builds on).

What is published, and what this reader relies on:

- The files ``FIRE-train-100K.json``, ``FIRE-test.json`` and ``FIRE-1M.json`` of
  https://huggingface.co/datasets/PengxiangLi/FIRE are each ONE JSON array (FIRE-1M is
  1.9 GB, so items are streamed with ``json_members.iter_items``).
- An item has ``id``, ``image`` (a path relative to the image folder), ``conversations``
  (``[{"from": "human" | "gpt", "value": ...}]``) and ``raw`` with
  ``raw["question"]["value"]`` and ``raw["groundtruth"]["value"]``: the fields FIRE's own
  loaders read (github.com/MM-FIRE/FIRE, ``llava/eval/eval_feedback.py`` and
  ``llava/eval/model_fire_chat_loader.py``, ``get_inputs``).
- A teacher reply has the form ``Score: <1-10>`` on its first line, then
  ``Feedback: <text>``; FIRE reads it with ``get_score`` (first integer of the first line,
  which must contain "Score:") and ``get_feedback`` (the text after "Feedback:"), in
  ``llava/eval/feedback_chat.py``. A dialogue stops when the score reaches 10.

The conversation shape read here is FIRE's student view with the teacher's replies kept
whole: the first ``human`` turn is the question (a leading ``<image>`` token is dropped),
every ``gpt`` turn is a student answer, and every later ``human`` turn is the teacher's
``Score/Feedback`` reply to the answer before it, the last answer's reply included. The
FIRE loaders keep student and teacher views in separate files; a record whose turns do not
alternate this way, or whose teacher turn has no readable score, is quarantined with the
reason, never guessed. Images default to ``ROOT/images`` (FIRE's loaders join ``image``
to their image root). FIRE draws on 27 source sets; option ``domain`` tags them all
(default General QA).
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mmcurate.core.domains import Domain
from mmcurate.core.records import Rejected, Sample

from .base import AdapterOptions, Located, SourceAdapter
from .image_qa import array_records, guarded, image_qa_sample, text_field

IMAGE_TOKEN = "<image>"
_SCORE_LINE = re.compile(r"Score:\s*(\d+)")
FEEDBACK = "Feedback:"


def teacher_reply(text: str) -> tuple[int, str]:
    """(score, feedback) of a FIRE teacher reply; ValueError when it has no readable score
    in 0..10 on its first line."""
    lines = text.strip().splitlines()
    match = _SCORE_LINE.search(lines[0]) if lines else None
    if match is None or not 0 <= int(match.group(1)) <= 10:
        raise ValueError(f"teacher turn without a readable 'Score: N' line: {text[:80]!r}")
    at = text.find(FEEDBACK)
    return int(match.group(1)), text[at + len(FEEDBACK):].strip() if at >= 0 else ""


def dialogue_turns(conversations: Any) -> tuple[str, list[dict[str, Any]]]:
    """(question, [{answer, score, feedback}]) of a FIRE conversation (see the module docstring)."""
    if not isinstance(conversations, list) or len(conversations) < 3:
        raise ValueError("conversations must hold a question, an answer and the teacher's reply")
    roles = [turn.get("from") if isinstance(turn, dict) else None for turn in conversations]
    values = [turn.get("value") if isinstance(turn, dict) else None for turn in conversations]
    if any(not isinstance(v, str) or not v.strip() for v in values):
        raise ValueError("every conversation turn needs a non-empty value")
    expected = ["human" if i % 2 == 0 else "gpt" for i in range(len(roles))]
    if roles != expected or len(roles) % 2 == 0:
        raise ValueError("conversations must alternate human/gpt and end with the teacher's reply to the last answer")
    question = values[0].replace(IMAGE_TOKEN, "").strip()
    turns = []
    for answer, reply in zip(values[1::2], values[2::2]):
        score, feedback = teacher_reply(reply)
        turns.append({"answer": answer.strip(), "score": score, "feedback": feedback})
    return question, turns


class FIREOptions(AdapterOptions):
    files: list[str] | None = None  # JSON files under root; None: every *.json there
    domain: Domain = "General QA"


class FIRESource(SourceAdapter):
    name = "fire"
    Options = FIREOptions
    options: FIREOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.files = self.listed_files(self.options.files, ["*.json"])
        self.image_dir = self.images or self.root / "images"

    def source_files(self) -> list[Path]:
        return list(self.files)

    def records(self) -> Iterator[Located | Rejected]:
        for path in self.files:
            for item in array_records(path):
                yield item if isinstance(item, Rejected) else guarded(*item, lambda: self._sample(path.stem, item[1]))

    def _sample(self, file: str, record: dict[str, Any]) -> Sample:
        ident = text_field(record, "id")
        image = text_field(record, "image")
        raw = record.get("raw")
        truth = raw.get("groundtruth") if isinstance(raw, dict) else None
        if not isinstance(truth, dict) or not isinstance(truth.get("value"), str) or not truth["value"].strip():
            raise ValueError("no ground truth (raw.groundtruth.value)")
        question, turns = dialogue_turns(record.get("conversations"))
        if not question:
            raise ValueError("empty question")
        meta = {"file": file, "dialogue": turns}
        return image_qa_sample(self.store, self.name, ident, question, [truth["value"].strip()], self.image_dir,
                               image, self.options.domain, meta)
