"""POPE: yes/no probes of object existence (Li et al., "Evaluating Object Hallucination in
Large Vision-Language Models", EMNLP 2023), the benchmark Kestrel reports (seed 000, 4.1).

Published layout (github.com/RUCAIBox/POPE at 3df3ba1, ``README.md`` "Build POPE" and the
files under ``output/``):

- ``output/coco/coco_pope_{random,popular,adversarial}.json``: one JSON object per line,
  ``{"question_id": 1, "image": "COCO_val2014_000000310196.jpg", "text": "Is there a
  snowboard in the image?", "label": "yes"}``; question ids start at 1 in each file; each
  file holds 3,000 questions about 500 images, 1,500 "yes" and 1,500 "no" (six per image,
  a positive and then a negative, three times).
- ``output/seem/{aokvqa,gqa}/<dataset>_pope_seem_<split>.json`` (objects found by SEEM on
  A-OKVQA and GQA images): the same records as ONE JSON array.
- The images are not in the repository: COCO val2014 (or the GQA / A-OKVQA images), named
  by ``image``.
- The question is POPE's template ``Is there a {} in the image?`` with "an" before a
  vowel (``utils.create_question``; the published files read "Is there an umbrella in the
  image?"); the label is ``yes`` or ``no``. POPE's ``evaluate.py`` reads an answer as "no"
  when its first sentence holds the word No, no or not, else "yes", and reports accuracy,
  precision, recall, F1 and the yes ratio (``evaluation.pope.probes``).

- Beside the question files, ``output/coco/`` also holds ``coco_ground_truth_objects.json`` and
  ``coco_co_occur.json`` (POPE's object lists): not question files, not read.

Read: every ``<dataset>_pope_<split>.json`` and ``<dataset>_pope_seem_<split>.json`` anywhere
under ROOT (a clone of the repository as it is: ``output/coco/...`` and
``output/seem/<dataset>/...``; or one set's folder; or the ``files`` given, relative to ROOT),
a file's split and dataset from its name, JSON lines or one array (told apart by the first
character); images under the source's ``images`` folder (default ``ROOT/images``; ``--images
DIR`` for COCO's val2014 folder, where POPE's ``image`` names are COCO's file names). One
sample per question: source id ``<dataset>/<split>/<question id>``, the question, answers
``[label]``, the image, and in meta the split, dataset, question id, the image's published
file name (``image``), the probed object (read back from the template; null for another
wording) and origin ``published``.

Fields are read as a user's copy may hold them: a question id given as a string of digits
(``"8"``) is that id; a label is read case-insensitively and stripped (``"YES"``, ``" no"``).

Quarantined with their locator (``file:line`` or ``file:<index>``): a record without a
question id, image or question, a question id that is not a whole number, a label other than
yes/no, a missing or undecodable image, a question id repeated within its (dataset, split)
(``duplicate source_id``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from mmcurate.core.errors import SourceError
from mmcurate.core.images import ImageStore
from mmcurate.core.records import Rejected, Sample

from .base import AdapterOptions, JsonLine, Located, SourceAdapter, count_lines, jsonl_records, open_text, text_field
from .image_qa import array_records, guarded

Split = Literal["random", "popular", "adversarial"]
SPLITS: tuple[Split, ...] = ("random", "popular", "adversarial")  # POPE's negative sampling strategies
LABELS = ("yes", "no")
TEMPLATE = "Is there a {} in the image?"  # POPE's default --template
PUBLISHED, BUILT = "published", "built"
_FILE = re.compile(rf"^(?P<dataset>.+?)_pope_(?:seem_)?(?P<split>{'|'.join(SPLITS)})\.json$")
_QUESTION = re.compile(r"^Is there an? (?P<object>.+) in the image\?$")


def probe_question(name: str) -> str:
    """POPE's question about ``name``: "a", or "an" before a vowel."""
    return TEMPLATE.replace(" a ", " an " if name[:1].lower() in "aeiou" else " a ").format(name)


def probe_object(text: str) -> str | None:
    """The object a POPE question asks about, or None for another wording."""
    match = _QUESTION.match(text.strip())
    return match.group("object") if match else None


def read_label(value: str) -> str:
    """A yes/no label as a user's copy may spell it (``"YES"``, ``" no"``): lower-cased, stripped."""
    label = value.strip().lower()
    if label not in LABELS:
        raise ValueError(f"label {value!r} is not yes or no")
    return label


def read_question_id(record: dict[str, Any]) -> int:
    """POPE's question id: an integer, or a string of digits holding one (``"8"`` is id 8)."""
    value = record.get("question_id")
    if value is None:
        raise ValueError("missing field question_id")
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"question_id {value!r} is not a whole number")
    return value


def probe_sample(
    store: ImageStore,
    source: str,
    dataset: str,
    split: str,
    question_id: int,
    image_root: Path,
    image: str,
    text: str,
    label: str,
    origin: str,
) -> Sample:
    """One probe: the question, its label as the answer, the stored image, and its place in POPE."""
    if label not in LABELS:
        raise ValueError(f"label {label!r} is not yes or no")
    sha = store.put_file(image_root, image)
    meta = {
        "split": split,
        "dataset": dataset,
        "question_id": question_id,
        "image": image,
        "object": probe_object(text),
        "origin": origin,
    }
    return Sample(source, f"{dataset}/{split}/{question_id}", text, [label], images=[sha], meta=meta)


def dataset_splits(rows: list[dict], known: tuple[str, ...] = SPLITS) -> list[tuple[str, str]]:
    """The (dataset, split) pairs of ``rows``: datasets by name, the ``known`` splits in their
    order (POPE's; ``sources.mme.PROBE_SPLITS`` adds MME's subtasks in Kestrel's Table 2 order),
    then any other split by name."""
    order = {s: n for n, s in enumerate(known)}
    pairs = {(r["dataset"], r["split"]) for r in rows}
    return sorted(pairs, key=lambda p: (p[0], order.get(p[1], len(order)), p[1]))


def split_of(path: Path) -> tuple[str, str] | None:
    """(dataset, split) of a POPE question file, by its name; None for another file."""
    match = _FILE.match(path.name)
    return (match.group("dataset"), match.group("split")) if match else None


class PopeOptions(AdapterOptions):
    files: list[str] | None = None  # files under root; None: every <dataset>_pope[_seem]_<split>.json, recursively
    splits: list[Split] | None = None  # None: every split found


class PopeSource(SourceAdapter):
    name = "pope"
    Options = PopeOptions
    options: PopeOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        found = self.listed_files(
            self.options.files, [f"**/*_pope_{s}.json" for s in SPLITS] + [f"**/*_pope_seem_{s}.json" for s in SPLITS]
        )
        self.files: dict[Path, tuple[str, str]] = {}
        for path in found:
            named = split_of(path)
            if named is None:
                raise SourceError(
                    f"pope: {path.name} is not named <dataset>_pope_<split>.json (split one of {', '.join(SPLITS)})"
                )
            if self.options.splits is None or named[1] in self.options.splits:
                self.files[path] = named
        if not self.files:
            raise SourceError(f"pope: no question file of the splits {self.options.splits} under {self.root}")
        self.image_dir = self.images or self.root / "images"

    def source_files(self) -> list[Path]:
        return list(self.files)

    def count_records(self) -> int:
        return sum(
            count_lines(path) if not _is_array(path) else sum(1 for _ in array_records(path)) for path in self.files
        )

    def records(self) -> Iterator[Located | Rejected]:
        for path, (dataset, split) in self.files.items():
            items = array_records(path) if _is_array(path) else _lines(path)
            for item in items:
                if isinstance(item, Rejected):
                    yield item
                    continue
                locator, record = item
                yield guarded(locator, record, self._sample, dataset, split, record)

    def _sample(self, dataset: str, split: str, record: dict[str, Any]) -> Sample:
        return probe_sample(
            self.store,
            self.name,
            dataset,
            split,
            read_question_id(record),
            self.image_dir,
            text_field(record, "image"),
            text_field(record, "text"),
            read_label(text_field(record, "label")),
            PUBLISHED,
        )


def _is_array(path: Path) -> bool:
    with open_text(path) as handle:
        return handle.read(64).lstrip()[:1] == "["


def _lines(path: Path) -> Iterator[tuple[str, dict[str, Any]] | Rejected]:
    for item in jsonl_records(path):
        yield (item.locator, item.record) if isinstance(item, JsonLine) else item
