"""MMDocRAG: document questions with candidate text and image quotes, some marked gold.

Reads ``dataset/{dev,evaluation}_{15,20}.jsonl`` (or the same files directly under the
root). ``train.jsonl`` is in chat-messages format and is never opened. The ``_15`` and
``_20`` files hold the same questions with 15 or 20 candidate quotes; option ``quotes``
picks which (default ``20``, the harder set). ``source_id`` is ``<file stem>:<q_id>``, so
both variants can be ingested side by side without colliding.

Quote ids (``text3``, ``image1``) are numbered per question, so they are not identities.
A context is named by the layout element it quotes: ``mmdocrag:<doc_name>:p<page_id>:l<layout_id>``
(the same element quoted by two questions gets the same context id). ``meta["quote_ids"]``
maps each kept quote id to its context id, for resolving ``answer_interleaved``.

``img_path`` is resolved under the images folder (``--images``, default ``ROOT/images``,
the unzipped ``images.zip``); both ``images/x.jpg`` and ``x.jpg`` forms are accepted,
paths escaping the folder are refused. An unusable gold quote quarantines the whole
sample (it would lose gold); an unusable non-gold quote is dropped with a quarantine row.

A copy whose quotes lack ``page_id``/``layout_id`` names an image quote's context by its
image file and a text quote's by the question and quote id (``q<q_id>:text3``).
``answer_short`` written as a Python list of scalars (``"['46', '27', '64']"``, a few
percent of the published values) becomes several answers; any other text is one answer.

Format facts relied on, and where they are published: file names, line counts and field
types (``q_id`` int, ``answer_short`` string, quote ``page_id``/``layout_id`` int,
``train.jsonl`` in OpenAI message format): MMDocRAG/MMDocRAG ``dataset/README.md``
(commit 0bd6a1b). The exact ``img_path`` shape is not documented there.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from mmcurate.core.errors import ImageRejected, SourceError
from mmcurate.core.records import Context, Rejected, Sample

from .base import AdapterOptions, Located, SourceAdapter, count_lines, jsonl_records, required, text_field

SPLITS: tuple[Literal["dev", "evaluation"], ...] = ("dev", "evaluation")
# a flat Python list of quoted strings or numbers, as some answer_short values are written
LIST_TEXT = re.compile(r"""\s*\[\s*(?:(?:'[^'\\]*'|"[^"\\]*"|-?\d+(?:\.\d+)?)\s*(?:,\s*|(?=\])))*\]\s*""")


class MMDocRAGOptions(AdapterOptions):
    quotes: Literal["15", "20", "both"] = "20"
    splits: list[Literal["dev", "evaluation"]] = list(SPLITS)


class QuoteError(ValueError):
    """One candidate quote is unusable; the message says why."""


class MMDocRAGSource(SourceAdapter):
    name = "mmdocrag"
    Options = MMDocRAGOptions
    options: MMDocRAGOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        folder = self.root / "dataset" if (self.root / "dataset").is_dir() else self.root
        counts = ("15", "20") if self.options.quotes == "both" else (self.options.quotes,)
        variants = [f"{split}_{n}" for split in self.options.splits for n in counts]
        self.files = self.split_files(variants, variants, lambda variant: f"{variant}.jsonl", folder)
        self.image_dir = self.images if self.images is not None else self.root / "images"
        if not self.image_dir.is_dir():
            raise SourceError(f"mmdocrag: image folder {self.image_dir} not found (unzip images.zip there)")

    def source_files(self) -> list[Path]:
        return list(self.files.values())

    def count_records(self) -> int:
        return sum(count_lines(path) for path in self.files.values())

    def records(self) -> Iterator[Located | Rejected]:
        for variant, path in self.files.items():
            for item in jsonl_records(path, "malformed JSON"):  # undecodable bytes: quarantined at ingest
                if isinstance(item, Rejected):
                    yield item
                else:
                    yield from self._question(variant, item.locator, item.record, item.raw)

    def _question(self, variant: str, locator: str, record: dict[str, Any], line: str) -> Iterator[Located | Rejected]:
        problem = _shape_problem(record)
        if problem:
            yield Rejected(locator, problem, line)
            return
        quotes = {q["quote_id"]: ("text", q) for q in record["text_quotes"]}
        quotes.update({q["quote_id"]: ("image", q) for q in record["img_quotes"]})
        gold_ids = record["gold_quotes"]
        unknown = [g for g in gold_ids if g not in quotes]
        if unknown:
            yield Rejected(
                locator,
                f"gold {'quote' if len(unknown) == 1 else 'quotes'} {', '.join(unknown)} not among the candidate quotes",
                line,
            )
            return

        kept: dict[str, Context] = {}
        dropped: list[Rejected] = []
        for quote_id, (modality, quote) in quotes.items():
            try:
                context = self._context(record["doc_name"], record["q_id"], modality, quote)
                clash = next((q for q, c in kept.items() if c.context_id == context.context_id), None)
                if clash is not None:
                    raise QuoteError(f"same element as {clash} ({context.context_id})")
            except (QuoteError, ImageRejected) as exc:
                if quote_id in gold_ids:
                    yield Rejected(locator, f"gold quote {quote_id} unusable: {exc}", line)
                    return
                dropped.append(Rejected(locator, f"dropped quote {quote_id}: {exc}", json.dumps(quote)))
                continue
            kept[quote_id] = context
        yield from dropped
        yield Located(
            locator,
            Sample(
                source=self.name,
                source_id=f"{variant}:{record['q_id']}",
                question=record["question"],
                answers=short_answers(record["answer_short"]),
                gold_contexts=[kept[g] for g in gold_ids],
                negative_contexts=[c for q, c in kept.items() if q not in gold_ids],
                meta={
                    "q_id": record["q_id"],
                    "doc_name": record["doc_name"],
                    "domain": record.get("domain"),
                    "question_type": record.get("question_type"),
                    "evidence_modality_type": record.get("evidence_modality_type"),
                    "answer_interleaved": record.get("answer_interleaved"),
                    "quote_ids": {q: c.context_id for q, c in kept.items()},
                },
            ),
            line,
        )

    def _context(self, doc_name: str, q_id: Any, modality: str, quote: dict[str, Any]) -> Context:
        context_id = f"mmdocrag:{doc_name}:{_element(q_id, modality, quote)}"
        if modality == "image":
            description = quote.get("img_description")
            return Context(
                context_id,
                "image",
                text=description if isinstance(description, str) else None,
                image=self._image(quote.get("img_path")),
            )
        text = quote.get("text")
        if not isinstance(text, str) or not text.strip():
            raise QuoteError("text quote without text")
        return Context(context_id, "text", text=text)

    def _image(self, img_path: Any) -> str:
        """Store the quote's image; ``images/x.jpg`` and ``x.jpg`` both resolve under the folder."""
        if not isinstance(img_path, str) or not img_path:
            raise QuoteError("image quote without img_path")
        relative = img_path.replace("\\", "/")
        if relative.startswith("images/") and not _is_file(self.image_dir / relative):
            relative = relative.removeprefix("images/")
        return self.store.put_file(self.image_dir, relative)


def _element(q_id: Any, modality: str, quote: dict[str, Any]) -> str:
    """What a quote quotes: its layout element ``p<page_id>:l<layout_id>``; in copies without
    those, the image file (an identity across questions), else the quote id qualified by
    the question (quote ids are numbered per question, so alone they identify nothing)."""
    page, layout = quote.get("page_id"), quote.get("layout_id")
    if page is not None and layout is not None:
        return f"p{page}:l{layout}"
    img_path = quote.get("img_path")
    if modality == "image" and isinstance(img_path, str) and img_path:
        return img_path.replace("\\", "/").removeprefix("images/")
    return f"q{q_id}:{quote['quote_id']}"


def short_answers(answer: str) -> list[str]:
    """``answer_short`` as answers: a few percent of them are a Python list written as text
    (``"['46', '27', '64']"``), which stands for several answers; any other text is one."""
    if not LIST_TEXT.fullmatch(answer):
        return [answer]
    try:
        value = ast.literal_eval(answer)  # a literal only: never evaluates code
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return [answer]
    if not isinstance(value, list) or not all(
        isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value
    ):
        return [answer]
    answers = list(dict.fromkeys(str(v).strip() for v in value if str(v).strip()))
    return answers or [answer]


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a file; False for a path the OS cannot even look up (a NUL byte)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _shape_problem(record: dict[str, Any]) -> str | None:
    """Why ``record`` is not an MMDocRAG question line, or None if it is one."""
    try:
        required(record, "q_id")
        for key in ("doc_name", "question", "answer_short"):
            text_field(record, key)
    except ValueError as exc:
        return str(exc)
    for key in ("text_quotes", "img_quotes", "gold_quotes"):
        if not isinstance(record.get(key), list):
            return f"{key} is missing or not a list"
    quotes = record["text_quotes"] + record["img_quotes"]
    if not all(isinstance(q, dict) and isinstance(q.get("quote_id"), str) for q in quotes):
        return "a quote is not an object with a quote_id"
    ids = [q["quote_id"] for q in quotes]
    if len(set(ids)) != len(ids):
        return "duplicate quote_id within the question"
    if not record["gold_quotes"] or not all(isinstance(g, str) for g in record["gold_quotes"]):
        return "gold_quotes is empty or not a list of quote ids"
    return None
