"""InfoSeek: visual info-seeking questions about OVEN images, linked to Wiki6M entities.

Layout read (see shared/SOURCES.md): ``infoseek_{train,val,test}.jsonl`` and
``infoseek_human.jsonl`` (questions), ``infoseek_{train,val}_withkb.jsonl`` (the gold
entity link), the Wiki6M KB ``Wiki6M_ver_1_0.jsonl(.gz)``, and images either at
``<images>/<first two digits>/<image_id>.jpg`` or through ``id2image.jsonl``
(``{image_id, image_path}``, paths relative to the image folder); a mapped id wins.

The gold context is the part of the linked entity's Wikipedia text that holds the
answer: a ``passage_words`` window of ``wikipedia_content`` around the first answer
occurrence, else ``wikipedia_summary``. Questions are read twice (they are small) so
that the KB is streamed once for just the linked entities.

Format facts relied on, and where they are published:

- file names ``infoseek_{train,val,test,human}.jsonl`` and ``infoseek_{train,val}_withkb.jsonl``:
  edchengg/infoseek_eval ``infoseek/README.md``;
- ``answer_eval`` is a list, or for numeric questions also a single
  ``{"wikidata": x, "range": [lo, hi]}`` object: the official evaluation reads both
  (edchengg/infoseek_eval ``infoseek_eval.py``, ``prepare_qid2example``, commit c8ef023);
  bare numbers inside it are kept as answers written as text;
- the test split has no ``answer`` field (questions only; shared/SOURCES.md): its records are
  not curatable and are counted under ``skipped`` (``SourceAdapter.skip_unlabelled``, the
  rule every source with an unlabelled split follows), not quarantined.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from mmcurate.core.errors import ImageRejected
from mmcurate.core.records import Context, Rejected, Sample
from mmcurate.core.text import find_answer

from .base import AdapterOptions, Located, SourceAdapter, count_lines, jsonl_records, required, text_field
from .kb_readers import Wiki6MEntity, locate, read_wiki6m, word_window

Split = Literal["train", "val", "test", "human"]
SPLITS: tuple[Split, ...] = ("train", "val", "test", "human")
KB_NAMES = ("Wiki6M_ver_1_0.jsonl.gz", "Wiki6M_ver_1_0.jsonl")
UNLABELLED = ("test",)  # the published test split holds questions only


def question_file(split: str) -> str:
    return "infoseek_human.jsonl" if split == "human" else f"infoseek_{split}.jsonl"


def withkb_file(split: str) -> str | None:
    return f"infoseek_{split}_withkb.jsonl" if split in ("train", "val") else None


class InfoSeekOptions(AdapterOptions):
    splits: list[Split] | None = None  # None: every split whose question file is present
    kb: Path | None = None  # None: Wiki6M_ver_1_0.jsonl(.gz) in the root, if present
    id2image: Path | None = None  # None: id2image.jsonl in the root, if present
    passage_words: int = Field(250, gt=0)


def _str_list(value: Any, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name} is not a list of strings")
    return value


def _number(value: Any) -> float | None:
    """``value`` when it is a finite JSON number (not a boolean), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _answers(record: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """Answers (``answer`` then ``answer_eval``'s strings and bare numbers, deduplicated)
    and numeric ranges. ``answer_eval`` is a list or, for numeric questions, also one
    ``{"wikidata": x, "range": [lo, hi]}`` object (the official evaluation accepts both)."""
    answers = list(_str_list(required(record, "answer"), "answer"))
    ranges: list[dict[str, Any]] = []
    evals = record.get("answer_eval") or []
    if isinstance(evals, dict):
        evals = [evals]
    if not isinstance(evals, list):
        raise ValueError("answer_eval is neither a list nor an object")
    for item in evals:
        if isinstance(item, str):
            answers.append(item)
        elif _number(item) is not None:
            answers.append(_number_text(item))
        elif (
            isinstance(item, dict)
            and _number(item.get("wikidata")) is not None
            and isinstance(item.get("range"), list)
            and len(item["range"]) == 2
            and all(_number(x) is not None for x in item["range"])
        ):
            ranges.append({"wikidata": item["wikidata"], "range": list(item["range"])})
        else:
            raise ValueError(f"answer_eval item {item!r} is neither a string, a number nor a numeric range")
    answers = list(dict.fromkeys(a.strip() for a in answers if a.strip()))
    if not answers:
        raise ValueError("answer is empty")
    return answers, ranges


class InfoSeekSource(SourceAdapter):
    name = "infoseek"
    Options = InfoSeekOptions
    options: InfoSeekOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        opts = self.options
        self.questions = self.split_files(opts.splits, SPLITS, question_file)
        self.kb = locate(self.name, self.root, opts.kb, KB_NAMES, "kb")
        self.id2image = locate(self.name, self.root, opts.id2image, ("id2image.jsonl",), "id2image")
        self.image_dir = self.images or self.root / "oven_images"

    def _withkb_paths(self) -> list[Path]:
        names = [withkb_file(s) for s in self.questions]
        return [self.root / n for n in names if n and (self.root / n).is_file()]

    def source_files(self) -> list[Path]:
        files = list(self.questions.values()) + self._withkb_paths()
        return files + [p for p in (self.id2image, self.kb) if p is not None]

    def count_records(self) -> int:
        return sum(count_lines(path) for path in self.questions.values())

    # ----------------------------------------------------------------- first pass

    def _wanted_ids(self) -> tuple[set[str], set[str]]:
        """data_ids and image_ids of every readable question (errors are reported later)."""
        data_ids: set[str] = set()
        image_ids: set[str] = set()
        for path in self.questions.values():
            for item in jsonl_records(path):
                if not isinstance(item, Rejected):
                    if isinstance(item.record.get("data_id"), str):
                        data_ids.add(item.record["data_id"])
                    if isinstance(item.record.get("image_id"), str):
                        image_ids.add(item.record["image_id"])
        return data_ids, image_ids

    def _read_map(
        self, path: Path, key: str, fields: tuple[str, ...], wanted: set[str], problems: list[Rejected]
    ) -> dict[str, tuple[str, ...]]:
        """``{record[key]: record[fields]}`` of a JSONL file, for wanted keys only."""
        found: dict[str, tuple[str, ...]] = {}
        for item in jsonl_records(path, "malformed line"):
            if isinstance(item, Rejected):
                problems.append(item)
                continue
            record = item.record
            if not isinstance(record.get(key), str):
                problems.append(Rejected(item.locator, f"malformed line: no string {key}", item.raw))
                continue
            if record[key] not in wanted:
                continue
            values = tuple(record.get(f) for f in fields)
            if not all(isinstance(v, str) and v for v in values):
                problems.append(
                    Rejected(item.locator, f"malformed line: {' / '.join(fields)} missing or not strings", item.raw)
                )
                continue
            found[record[key]] = values  # type: ignore[assignment]
        return found

    # ----------------------------------------------------------------- records

    def records(self) -> Iterator[Located | Rejected]:
        data_ids, image_ids = self._wanted_ids()
        problems: list[Rejected] = []
        links: dict[str, tuple[str, ...]] = {}
        for path in self._withkb_paths():
            links.update(self._read_map(path, "data_id", ("entity_id", "entity_text"), data_ids, problems))
        mapped: dict[str, str] = {}
        if self.id2image is not None:
            found = self._read_map(self.id2image, "image_id", ("image_path",), image_ids, problems)
            mapped = {k: v[0] for k, v in found.items()}
        entities: dict[str, Wiki6MEntity] = {}
        if self.kb is not None:
            load = read_wiki6m(self.kb, {link[0] for link in links.values()})
            entities, problems = load.entries, problems + load.problems
        yield from problems
        for split, path in self.questions.items():
            for item in jsonl_records(path):
                if isinstance(item, Rejected):
                    yield item
                    continue
                if split in UNLABELLED and item.record.get("answer") is None:
                    self.skip_unlabelled(split)
                    continue
                try:
                    yield Located(item.locator, self._sample(split, item.record, links, mapped, entities), item.raw)
                except ImageRejected as exc:  # before ValueError: it is one
                    yield Rejected(item.locator, str(exc), item.raw)
                except (ValueError, KeyError) as exc:
                    yield Rejected(item.locator, f"malformed record: {exc}", item.raw)

    def _sample(
        self,
        split: str,
        record: dict[str, Any],
        links: dict[str, tuple[str, ...]],
        mapped: dict[str, str],
        entities: dict[str, Wiki6MEntity],
    ) -> Sample:
        for name in ("data_id", "image_id", "question"):
            text_field(record, name)
        answers, ranges = _answers(record)
        image_id = record["image_id"]
        relative = mapped.get(image_id) or f"{image_id.removeprefix('oven_')[:2]}/{image_id}.jpg"
        image = self.store.put_file(self.image_dir, relative)
        meta: dict[str, Any] = {"split": split, "data_split": record.get("data_split"), "image_id": image_id}
        if ranges:
            meta["numeric_ranges"] = ranges
        gold: list[Context] = []
        link = links.get(record["data_id"])
        if link is None:
            meta["gold_missing"] = "no entity link in *_withkb.jsonl"
        else:
            meta["entity_id"], meta["entity_text"] = link
            if self.kb is None:
                meta["gold_missing"] = "no Wiki6M KB given"
            elif link[0] not in entities:
                meta["gold_missing"] = f"entity {link[0]} not in the KB"
            else:
                gold = self._gold(entities[link[0]], answers, meta)
        return Sample(
            self.name,
            record["data_id"],
            record["question"].strip(),
            answers,
            images=[image],
            gold_contexts=gold,
            meta=meta,
        )

    def _gold(self, entity: Wiki6MEntity, answers: list[str], meta: dict[str, Any]) -> list[Context]:
        """The content passage holding an answer, else the summary; notes which in ``meta``."""
        meta["wikipedia_title"] = entity.title
        title = entity.title or None
        at = find_answer(entity.content, answers) if entity.content else -1
        if entity.content and at >= 0:
            first_word, passage = word_window(entity.content, at, self.options.passage_words)
            meta["gold_from"] = "content"
            return [Context(f"wiki6m:{entity.wikidata_id}#w{first_word}", "text", text=passage, title=title)]
        if entity.summary:
            meta["gold_from"] = "summary"
            return [Context(f"wiki6m:{entity.wikidata_id}#summary", "text", text=entity.summary, title=title)]
        meta["gold_missing"] = "entity has no summary and no content passage with an answer"
        return []
