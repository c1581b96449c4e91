"""ViQuAE: TriviaQA-derived questions about named entities in pictures, over KILT Wikipedia.

Layout read (see shared/SOURCES.md): ``{train,validation,test}.jsonl`` with ``id``,
``image`` (file name under the image folder, default ``ROOT/images``), ``input``,
``output {answer, original_answer, provenance [{title, wikipedia_id}]}``; the KB is a
KILT-format JSONL (``kb.jsonl(.gz)`` or KILT's ``kilt_knowledgesource.json``) whose text is
a paragraph list or ``{"paragraph": [...]}`` (the ViQuAE datasets export).

Gold = the paragraphs of the provenance articles that contain an answer as whole normalised
words (``core.text.find_answer``), KILT's title and ``Section::::`` header paragraphs
excepted. A question whose provenance article is absent from the KB is kept with no gold
and ``meta.gold_missing``: the record itself is valid, a trimmed KB is a normal way to run,
and the pipeline's gold check later drops such samples with a ledger entry instead of them
vanishing at ingest.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from mmcurate.core.errors import ImageRejected
from mmcurate.core.records import Context, Rejected, Sample
from mmcurate.core.text import find_answer

from .base import AdapterOptions, Located, SourceAdapter, count_lines, jsonl_records, text_field
from .kb_readers import KiltArticle, locate, read_kilt, title_key

Split = Literal["train", "validation", "test"]
SPLITS: tuple[Split, ...] = ("train", "validation", "test")
KB_NAMES = ("kb.jsonl", "kb.jsonl.gz", "kilt_knowledgesource.json")


class ViQuAEOptions(AdapterOptions):
    splits: list[Split] | None = None  # None: every split whose JSONL is present
    kb: Path | None = None  # None: the first of kb.jsonl, kb.jsonl.gz, kilt_knowledgesource.json


def _provenance(record: dict[str, Any]) -> list[dict[str, str]]:
    """``[{wikipedia_id, title}]`` of a record's output; malformed entries raise ValueError."""
    output = record.get("output")
    items = output.get("provenance") if isinstance(output, dict) else None
    if items is None:
        return []
    if not isinstance(items, list):
        raise ValueError("output.provenance is not a list")
    found = []
    for item in items:
        if not isinstance(item, dict):
            raise ValueError(f"provenance item {item!r} is not an object")
        wid, title = item.get("wikipedia_id"), item.get("title")
        found.append(
            {"wikipedia_id": "" if wid is None else str(wid), "title": title if isinstance(title, str) else ""}
        )
    return found


def _answers(record: dict[str, Any]) -> list[str]:
    output = record.get("output")
    if not isinstance(output, dict):
        raise ValueError("missing field output")
    aliases = output.get("answer") or []
    if isinstance(aliases, str):
        aliases = [aliases]
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise ValueError("output.answer is not a list of strings")
    original = output.get("original_answer")
    first = [original] if isinstance(original, str) else []
    answers = list(dict.fromkeys(a.strip() for a in first + aliases if a.strip()))
    if not answers:
        raise ValueError("missing field output.answer")
    return answers


def _is_header(paragraph: str, title: str) -> bool:
    text = paragraph.strip()
    return text.startswith("Section::::") or text == title.strip()


class ViQuAESource(SourceAdapter):
    name = "viquae"
    Options = ViQuAEOptions
    options: ViQuAEOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        opts = self.options
        self.questions = self.split_files(opts.splits, SPLITS, lambda split: f"{split}.jsonl")
        self.kb = locate(self.name, self.root, opts.kb, KB_NAMES, "kb")
        self.image_dir = self.images or self.root / "images"

    def source_files(self) -> list[Path]:
        return list(self.questions.values()) + ([self.kb] if self.kb else [])

    def count_records(self) -> int:
        return sum(count_lines(path) for path in self.questions.values())

    def _wanted(self) -> set[str]:
        """Article keys (ids and title keys) the questions' provenance points to."""
        wanted: set[str] = set()
        for path in self.questions.values():
            for item in jsonl_records(path):
                try:
                    provenance = [] if isinstance(item, Rejected) else _provenance(item.record)
                except ValueError:
                    continue
                for entry in provenance:
                    wanted.update(k for k in (entry["wikipedia_id"], entry["title"] and title_key(entry["title"])) if k)
        return wanted

    def records(self) -> Iterator[Located | Rejected]:
        articles: dict[str, KiltArticle] = {}
        if self.kb is not None:
            load = read_kilt(self.kb, self._wanted())
            articles = load.entries
            yield from load.problems
        for split, path in self.questions.items():
            for item in jsonl_records(path):
                if isinstance(item, Rejected):
                    yield item
                    continue
                try:
                    yield Located(item.locator, self._sample(split, item.record, articles), item.raw)
                except ImageRejected as exc:  # before ValueError: it is one
                    yield Rejected(item.locator, str(exc), item.raw)
                except ValueError as exc:
                    yield Rejected(item.locator, f"malformed record: {exc}", item.raw)

    def _sample(self, split: str, record: dict[str, Any], articles: dict[str, KiltArticle]) -> Sample:
        ident = text_field(record, "id", numbers=True)
        for name in ("image", "input"):
            text_field(record, name)
        answers = _answers(record)
        provenance = _provenance(record)
        image = self.store.put_file(self.image_dir, record["image"])
        meta: dict[str, Any] = {
            "split": split,
            "image": record["image"],
            "original_answer": record["output"].get("original_answer"),
            "provenance": provenance,
            **{k: record.get(k) for k in ("kilt_id", "url", "wikidata_id", "original_question")},
        }
        if record.get("meta") is not None:
            meta["viquae_meta"] = record["meta"]
        gold = self._gold(provenance, answers, articles, meta)
        return Sample(self.name, ident, record["input"].strip(), answers, images=[image], gold_contexts=gold, meta=meta)

    def _gold(
        self,
        provenance: list[dict[str, str]],
        answers: list[str],
        articles: dict[str, KiltArticle],
        meta: dict[str, Any],
    ) -> list[Context]:
        if not provenance:
            meta["gold_missing"] = "no provenance"
            return []
        if self.kb is None:
            meta["gold_missing"] = "no KB given"
            return []
        gold: list[Context] = []
        notes: list[str] = []
        for item in provenance:
            article = articles.get(item["wikipedia_id"]) or (
                articles.get(title_key(item["title"])) if item["title"] else None
            )
            if article is None:
                notes.append(f"provenance article {item['wikipedia_id'] or item['title']!r} not in the KB")
                continue
            found = [
                Context(f"kilt:{article.wikipedia_id}#{j}", "text", text=p.strip(), title=article.title or None)
                for j, p in enumerate(article.paragraphs)
                if not _is_header(p, article.title) and find_answer(p, answers) >= 0
            ]
            if not found:
                notes.append(f"no paragraph of {article.title!r} contains an answer")
            gold += [c for c in found if c.context_id not in {g.context_id for g in gold}]
        if notes:
            meta["gold_missing" if not gold else "gold_notes"] = "; ".join(notes)
        return gold
