"""Encyclopedic-VQA: questions about landmark and species photos, grounded in Wikipedia sections.

Layout read (see shared/SOURCES.md): ``{train,val,test}.csv``, the KB
``encyclopedic_kb_wiki.json`` (one JSON object url -> article, parsed streaming), and
images under the image folder (default: the root):

- ``landmarks``: ``GLD/<id[0]>/<id[1]>/<id[2]>/<id>.jpg`` (the Google Landmarks v2 layout);
- ``inaturalist``: through ``inat_id2name.json``, a JSON object ``{image_id: path}`` with
  paths relative to the image folder. EVQA publishes iNaturalist 2021 image ids only, so
  this map is user-built from iNat21's ``train.json``/``val.json`` (``images[].id`` ->
  ``images[].file_name``); JSON because it is read with the same streaming member reader
  as the KB, keeping only the ids the questions use.

Rows carry no id, so ``source_id`` is ``"<split>:<row>"`` with the 0-based data-row index
(the pandas index the EVQA authors' code uses); published CSVs are immutable, so it is
stable. Gold is the article section at ``evidence_section_id``; templated rows fall back
to their ``evidence`` text when the KB lacks the article.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from mmcurate.core.errors import ImageRejected
from mmcurate.core.records import Context, Rejected, Sample
from mmcurate.core.text import find_answer

from .base import AdapterOptions, Located, SourceAdapter, required, text_field
from .kb_readers import EncyclopedicArticle, iter_object_members, locate, read_encyclopedic_kb

Split = Literal["train", "val", "test"]
SPLITS: tuple[Split, ...] = ("train", "val", "test")
KB_NAME = "encyclopedic_kb_wiki.json"
INAT_MAP_NAME = "inat_id2name.json"


class EVQAOptions(AdapterOptions):
    splits: list[Split] | None = None  # None: every split whose CSV is present
    kb: Path | None = None  # None: encyclopedic_kb_wiki.json in the root, if present
    inat_map: Path | None = None  # None: inat_id2name.json in the root, if present


def _multi(value: str | None) -> list[str]:
    """The non-empty ``|``-separated items of a cell."""
    return [part.strip() for part in (value or "").split("|") if part.strip()]


def _section_ids(value: str | None) -> list[int]:
    ids = []
    for part in _multi(value):
        try:
            ids.append(int(float(part)))  # pandas exports may write 3.0
        except (ValueError, OverflowError):  # OverflowError: "inf"
            raise ValueError(f"evidence_section_id {value!r} is not an integer") from None
    return ids


class EncyclopedicVQASource(SourceAdapter):
    name = "evqa"
    Options = EVQAOptions
    options: EVQAOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        opts = self.options
        self.tables = self.split_files(opts.splits, SPLITS, lambda split: f"{split}.csv")
        self.kb = locate(self.name, self.root, opts.kb, (KB_NAME,), "kb")
        self.inat_map = locate(self.name, self.root, opts.inat_map, (INAT_MAP_NAME,), "inat_map")
        self.image_dir = self.images or self.root

    def source_files(self) -> list[Path]:
        files = list(self.tables.values())
        return files + [p for p in (self.kb, self.inat_map) if p is not None]

    def count_records(self) -> int:
        return sum(1 for path in self.tables.values() for _ in self._rows(path))

    def _rows(self, path: Path) -> Iterator[tuple[int, str, dict[str, Any] | Rejected]]:
        """``(row index, locator, row or rejection)``; the locator's line is where the row ends."""
        with open(
            path, encoding="utf-8-sig", errors="surrogateescape", newline=""
        ) as handle:  # bad bytes: quarantined at ingest
            reader = csv.DictReader(handle)
            index = 0
            while True:
                try:
                    row = next(reader)
                except StopIteration:
                    return
                except csv.Error as exc:  # DictReader.line_num is the last good row's: ask its reader
                    where = f"{path.name}:{reader.reader.line_num}"
                    yield index, where, Rejected(where, f"malformed CSV row: {exc}")
                    index += 1
                    continue
                locator = f"{path.name}:{reader.line_num}"
                if None in row or None in row.values():
                    width = len(reader.fieldnames or [])
                    got = width + len(row.get(None) or []) - sum(v is None for v in row.values())
                    raw = ",".join(str(v) for k, v in row.items() if k is not None)
                    yield index, locator, Rejected(locator, f"malformed CSV row: {got} fields, header has {width}", raw)
                else:
                    yield index, locator, row
                index += 1

    def _wanted(self) -> tuple[set[str], set[str]]:
        urls: set[str] = set()
        inat: set[str] = set()
        for path in self.tables.values():
            for _, _, row in self._rows(path):
                if isinstance(row, dict):
                    urls.update(_multi(row.get("wikipedia_url")))
                    if (row.get("dataset_name") or "").strip().lower() == "inaturalist":
                        inat.update(_multi(row.get("dataset_image_ids")))
        return urls, inat

    def records(self) -> Iterator[Located | Rejected]:
        urls, inat_ids = self._wanted()
        articles: dict[str, EncyclopedicArticle] = {}
        if self.kb is not None:
            load = read_encyclopedic_kb(self.kb, urls)
            articles = load.entries
            yield from load.problems
        inat: dict[str, str] = {}
        if self.inat_map is not None and inat_ids:
            for image_id, path in iter_object_members(self.inat_map, inat_ids):
                if isinstance(path, str) and path:
                    inat[image_id] = path
                else:
                    yield Rejected(f"{self.inat_map.name}:{image_id}", "image path is not a string", repr(path))
        for split, path in self.tables.items():
            for index, locator, row in self._rows(path):
                if isinstance(row, Rejected):
                    yield row
                    continue
                try:
                    yield Located(locator, self._sample(split, index, row, articles, inat), ",".join(row.values()))
                except (ValueError, ImageRejected) as exc:
                    yield Rejected(locator, str(exc), ",".join(row.values()))

    def _image_path(self, dataset: str, image_id: str, inat: dict[str, str]) -> str:
        if dataset == "landmarks":
            if len(image_id) < 3:
                raise ImageRejected(f"landmark image id {image_id!r} is too short for the GLD layout")
            return f"GLD/{image_id[0]}/{image_id[1]}/{image_id[2]}/{image_id}.jpg"
        if image_id not in inat:
            where = self.inat_map.name if self.inat_map else f"no {INAT_MAP_NAME}"
            raise ImageRejected(f"iNaturalist image {image_id} not in the id map ({where})")
        return inat[image_id]

    def _sample(
        self,
        split: str,
        index: int,
        row: dict[str, str],
        articles: dict[str, EncyclopedicArticle],
        inat: dict[str, str],
    ) -> Sample:
        question = text_field(row, "question")
        annotators = list(dict.fromkeys(_multi(required(row, "answer"))))
        if not annotators:
            raise ValueError("answer is empty")
        dataset = (row.get("dataset_name") or "").strip().lower()
        if dataset not in ("landmarks", "inaturalist"):
            raise ValueError(f"unknown dataset_name {row.get('dataset_name')!r}")
        image_ids = _multi(row.get("dataset_image_ids"))
        if not image_ids:
            raise ValueError("no dataset_image_ids")
        urls, titles = _multi(row.get("wikipedia_url")), _multi(row.get("wikipedia_title"))
        sections = _section_ids(row.get("evidence_section_id"))
        images: list[str] = []
        missing: list[dict[str, str]] = []
        for image_id in image_ids:
            try:
                images.append(self.store.put_file(self.image_dir, self._image_path(dataset, image_id, inat)))
            except ImageRejected as exc:
                missing.append({"image_id": image_id, "reason": str(exc)})
        if not images:
            raise ImageRejected("no usable image: " + "; ".join(f"{m['image_id']}: {m['reason']}" for m in missing))
        meta: dict[str, Any] = {
            "split": split,
            "question_type": (row.get("question_type") or "").strip(),
            "question_original": row.get("question_original"),
            "dataset_name": dataset,
            "dataset_category_id": row.get("dataset_category_id"),
            "image_ids": image_ids,
            "wikipedia_urls": urls,
            "wikipedia_titles": titles,
            "evidence_section_ids": sections,
            "evidence_section_title": row.get("evidence_section_title"),
            "encyclopedic_vqa_split": row.get("encyclopedic_vqa_split"),
        }
        parts = [[p.strip() for p in a.split("&&") if p.strip()] for a in annotators]
        if any(len(p) > 1 for p in parts):
            meta["answer_parts"] = parts
        if missing:
            meta["missing_images"] = missing
        gold = self._gold(urls, sections, annotators, articles, meta)
        if not gold and meta["question_type"] == "templated" and (row.get("evidence") or "").strip():
            section = sections[0] if sections else ""
            gold = [
                Context(
                    f"evqa:{urls[0] if urls else ''}#{section}:evidence",
                    "text",
                    text=row["evidence"].strip(),
                    title=titles[0] if titles else None,
                )
            ]
            meta["gold_from"] = "evidence"
            meta.pop("gold_missing", None)
        return Sample(self.name, f"{split}:{index}", question, annotators, images=images, gold_contexts=gold, meta=meta)

    def _gold(
        self,
        urls: list[str],
        sections: list[int],
        annotators: list[str],
        articles: dict[str, EncyclopedicArticle],
        meta: dict[str, Any],
    ) -> list[Context]:
        """One section per url: the i-th section id goes with the i-th url (2_hop rows list
        two of each). A url without a section id (its count is unconfirmed for 2_hop rows)
        contributes the sections that contain an answer or one of its ``&&`` parts."""
        gold: list[Context] = []
        notes: list[str] = []
        needles = annotators + [p for parts in meta.get("answer_parts", []) for p in parts]
        for i, url in enumerate(urls):
            article = articles.get(url)
            if article is None:
                notes.append(f"{url} not in the KB" if self.kb else "no KB given")
                continue
            texts = article.section_texts
            if i < len(sections):
                chosen = [sections[i]] if 0 <= sections[i] < len(texts) else []
                if not chosen:
                    notes.append(f"section {sections[i]} out of range for {url} ({len(texts)} sections)")
            else:
                chosen = [j for j, text in enumerate(texts) if find_answer(text, needles) >= 0]
            gold += [Context(f"evqa:{url}#{j}", "text", text=texts[j], title=article.title or None) for j in chosen]
        if gold:
            meta["gold_from"] = "kb"
        if notes:
            meta["gold_missing" if not gold else "gold_notes"] = "; ".join(dict.fromkeys(notes))
        return gold
