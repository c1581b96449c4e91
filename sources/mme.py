"""MME's hallucination subtasks (Fu et al., "MME: A Comprehensive Evaluation Benchmark for
Multimodal Large Language Models", 2023), the MME-Hallucination Kestrel reports (seed 000,
4.1 and Table 2: existence, count, position, color), read as yes/no probes of the ``pope``
benchmark (dataset ``mme``, the subtask as the split).

Published layout, two forms (both read):

- The benchmark's release folder, ``MME_Benchmark_release_version/`` (given by the authors on
  request; the Hub copy ``darkyarding/MME`` unpacks to ``MME_Benchmark_release_version/
  MME_Benchmark/``), a folder per subtask. The four hallucination subtasks keep each image and
  its question file side by side: ``existence/000000006040.jpg`` and
  ``existence/000000006040.txt``; five others (artwork, celebrity, landmark, posters, scene)
  keep them apart, ``<subtask>/images/<stem>.jpg`` and ``<subtask>/questions_answers_YN/
  <stem>.txt``. A question file holds two lines ``question<TAB>answer``, the answer ``Yes``
  or ``No`` (LLaVA's ``playground/data/eval/MME/convert_answer_to_mme.py``, ``get_gt``, at
  haotian-liu/LLaVA 32cebc3: "if images/ exists: images/ and questions_answers_YN/, else the
  subtask folder holds both").
- MME's evaluation tool (``eval_tool.zip`` in BradyFU/Awesome-Multimodal-Large-Language-Models
  at 1c1d69e, ``tools/``; its ``readme.txt``): ``Your_Results/<subtask>.txt``, one line per
  question, ``image_name<TAB>question<TAB>answer``, the two questions of an image on
  consecutive lines, a "Yes" then a "No" (``existence.txt`` begins ``000000006040.jpg  Is there
  a train in this image? Please answer yes or no.  Yes``; each of the four subtasks holds 60
  lines, 30 images). A model's reply is appended as a fourth field there; this reader reads
  the first three (a fourth is ignored). The images are the release folder's: give it as the
  source's ``images`` (``<images>/<subtask>/<image>``, or ``<images>/<subtask>/images/<image>``).

MME's score (its ``calculation.py``): per subtask, accuracy over questions plus accuracy+ over
images (both questions right), each in %, so at most 200; it reads the file two lines at a
time, one image per pair, so every image must have exactly two questions (``evaluation.pope.mme``).

Read: under ROOT, each subtask of ``subtasks`` (default the four hallucination subtasks) as a
folder ``<subtask>/`` at ROOT or one level below (``MME_Benchmark/``), or as a file
``<subtask>.txt`` (the evaluation tool's), the folder first. One sample per question: source id
``mme/<subtask>/<n>`` (n counts the subtask's questions from 1, question files by name, lines
in order), the question as published (with MME's "Please answer yes or no."), answers
``[yes|no]`` (read case-insensitively), the image, meta as ``sources.pope`` writes it (split =
the subtask, dataset ``mme``, ``image`` the published file name, origin ``published``; the
object of an "Is there a ... in the image/picture?" question, else null).

Quarantined with their locator (``file:line``): a line that is not ``question<TAB>answer`` (or
``image<TAB>question<TAB>answer``), an answer other than yes/no, a missing or undecodable image,
and both questions of an image whose questions are not one "yes" and one "no" (MME scores an
image by its pair: a question without its partner cannot be scored).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from mmcurate.core.errors import SourceError
from mmcurate.core.plural import counted
from mmcurate.core.records import Rejected

from .base import AdapterOptions, Located, SourceAdapter, open_text
from .image_qa import guarded
from .pope import PUBLISHED, SPLITS, probe_sample, read_label

DATASET = "mme"
HALLUCINATION = ("existence", "count", "position", "color")  # Kestrel's MME-Hallucination (seed 000, Table 2)
PROBE_SPLITS = (*SPLITS, *HALLUCINATION)  # the order a release's and an evaluation's rows are shown in
SUBTASKS = (
    *HALLUCINATION,
    "posters",
    "celebrity",
    "scene",
    "landmark",
    "artwork",
    "OCR",  # calculation.py's
    "commonsense_reasoning",
    "numerical_calculation",
    "text_translation",
    "code_reasoning",
)  # eval_type_dict
IMAGE_SUFFIXES = (".jpg", ".png", ".jpeg", ".JPG", ".PNG")
_OBJECT = re.compile(r"^Is there an? (?P<object>.+?) in (?:the|this) (?:image|picture)\?", re.IGNORECASE)
Line = tuple[str, str, str, str]  # locator, image file, question, answer as written


def mme_object(question: str) -> str | None:
    """The object an MME question asks about ("Is there a train in this image? ..."), or None."""
    match = _OBJECT.match(question.strip())
    return match.group("object") if match else None


class MMEOptions(AdapterOptions):
    subtasks: list[Literal[SUBTASKS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(HALLUCINATION), min_length=1
    )


class MMESource(SourceAdapter):
    name = "mme"
    Options = MMEOptions
    options: MMEOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.subtask_parts: dict[str, Path] = {}
        for subtask in dict.fromkeys(self.options.subtasks):
            found = [
                p
                for p in (self.root / subtask, *sorted(self.root.glob(f"*/{subtask}")), self.root / f"{subtask}.txt")
                if p.exists()
            ]
            if not found:
                raise SourceError(f"mme: no folder {subtask}/ or file {subtask}.txt under {self.root}")
            self.subtask_parts[subtask] = found[0]

    def source_files(self) -> list[Path]:
        return [path for subtask in self.subtask_parts for path, _ in self._question_files(subtask)]

    def _question_files(self, subtask: str) -> list[tuple[Path, Path]]:
        """(question file, its image folder) of a subtask, by name."""
        part = self.subtask_parts[subtask]
        if part.is_file():
            images = self.images or self.root
            folder = images / subtask
            return [(part, folder / "images" if (folder / "images").is_dir() else folder)]
        if (part / "questions_answers_YN").is_dir():
            return [(p, part / "images") for p in sorted((part / "questions_answers_YN").glob("*.txt"))]
        return [(p, part) for p in sorted(part.glob("*.txt"))]

    def records(self) -> Iterator[Located | Rejected]:
        for subtask in self.subtask_parts:
            number = 0
            for path, image_dir in self._question_files(subtask):
                lines, bad = self._lines(path)
                yield from bad
                pairs: dict[str, list[Line]] = {}
                for line in lines:
                    pairs.setdefault(line[1], []).append(line)
                for image, pair in pairs.items():
                    labels = sorted(answer.strip().lower() for *_, answer in pair)
                    if labels != ["no", "yes"]:
                        why = (
                            f"image {image} has {counted(len(pair), 'question')} answered {', '.join(labels) or 'nothing'}: "
                            "MME scores an image by its two questions, one yes and one no"
                        )
                        yield from (
                            Rejected(locator, why, f"{question}\t{answer}") for locator, _, question, answer in pair
                        )
                        continue
                    for locator, _, question, answer in pair:
                        number += 1
                        yield guarded(
                            locator,
                            {"question": question, "answer": answer},
                            self._sample,
                            subtask,
                            number,
                            image_dir,
                            image,
                            question,
                            answer,
                        )

    def _lines(self, path: Path) -> tuple[list[Line], list[Rejected]]:
        """The question lines of one file, and the lines that are not questions. A release
        question file names no image: its image is the file's stem with an image suffix."""
        tool = self.subtask_parts.get(path.stem) == path  # the evaluation tool's <subtask>.txt
        image = (
            None
            if tool
            else next(
                (
                    path.stem + s
                    for s in IMAGE_SUFFIXES
                    if (path.parent.parent / "images" / (path.stem + s)).is_file()
                    or (path.parent / (path.stem + s)).is_file()
                ),
                path.stem + ".jpg",
            )
        )
        lines: list[Line] = []
        bad: list[Rejected] = []
        with open_text(path) as handle:
            for n, text in enumerate(handle, start=1):
                if not text.strip():
                    continue
                fields = text.rstrip("\r\n").split("\t")
                locator = f"{path.parent.name}/{path.name}:{n}"
                if tool and len(fields) >= 3 and fields[0].strip():
                    lines.append((locator, fields[0].strip(), fields[1].strip(), fields[2]))
                elif not tool and len(fields) == 2 and image is not None:
                    lines.append((locator, image, fields[0].strip(), fields[1]))
                else:
                    shape = "image<TAB>question<TAB>answer" if tool else "question<TAB>answer"
                    bad.append(Rejected(locator, f"malformed line: not {shape}", text.strip()[:500]))
        return lines, bad

    def _sample(self, subtask: str, number: int, image_dir: Path, image: str, question: str, answer: str):
        if not question:
            raise ValueError("question is empty")
        sample = probe_sample(
            self.store, self.name, DATASET, subtask, number, image_dir, image, question, read_label(answer), PUBLISHED
        )
        sample.meta["object"] = mme_object(question)
        return sample
