"""The answer step of a RefLVQA setting: the model cites numbered documents per sentence.

- One answer (TextRAG, ImageRAG, MultiRAG): the question's documents numbered [1]..[D].
- Two-step MultiRAG (seed 004, section 5.2, Tables 16-17): an answer from the text documents
  and one from the image documents, each shown with a caption (a captioning model's, written
  for the question; without one the caption the document's source gives it, a stand-in, or a
  line saying it has none), then the model combines the two. The two answers number their own
  documents from 1; the combination sees them renumbered into one list (text documents
  first, then the image documents), may cite only numbers the two answers cite, and is read
  against that list. A question with documents of one modality only takes that branch's
  answer as its answer (nothing to combine); one with none is answered from no documents,
  like every setting.

Every reply is read strictly (``cited_answers``), with one retry and then a counted error;
an answer is ``failed`` when a call failed for good, ``unreadable`` when a reply stayed
unreadable, naming the step.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from mmcurate.models.labels import Label, RecordError, ask_parsed
from mmcurate.models.requests import ChatRequest
from mmcurate.retrieval.rag import Hit, source_caption

from .cited_answers import CitedSentence, parse_cited_answer
from .prompts import (
    ANSWER_TEMPLATE,
    CAPTION_TEMPLATE,
    MERGE_REMINDER,
    MERGE_TEMPLATE,
    answer_messages,
    answer_reminder,
    caption_messages,
    merge_messages,
)

ANSWERED, FAILED, UNREADABLE = "answered", "failed", "unreadable"
SOURCE_CAPTIONS = "source captions (stand-in)"
_END = re.compile(r"[.!?]+$")


@dataclass
class Answer:
    hits: list[Hit]  # the documents the answer could cite, in the order they were numbered
    # (text, cited doc ids, invalid citation numbers: of no shown document); None: no readable answer
    sentences: list[tuple[str, list[str], list[int]]] | None
    reply: str | None  # the final reply as given
    status: str
    error: str | None = None
    captions: dict[str, str | None] = field(default_factory=dict)  # image doc id -> caption shown (Two-step)
    steps: list[dict[str, Any]] = field(default_factory=list)  # Two-step: each branch's reply


@dataclass(frozen=True)
class Answering:
    """Who answers and how the documents are shown."""

    pool: Any  # models.client.ModelPool
    model: str
    documents: Mapping[str, Mapping[str, Any]]  # doc_id -> knowledge-base row
    doc_chars: int = 2000
    max_tokens: int = 512
    captioner: str | None = None  # a vision model of the config; None: source captions (stand-in)
    caption_max_tokens: int = 128
    stage: str = "evaluate.reflvqa.answer"  # the call counter's name of this setting's calls (plan vs spent)


def answer_request(row: Mapping[str, Any], documents: Sequence[Mapping[str, Any]], max_tokens: int) -> ChatRequest:
    return ChatRequest(
        key=row["sample_id"],
        template=ANSWER_TEMPLATE,
        max_tokens=max_tokens,
        messages=answer_messages(row["question"], row["images"], documents),
    )


def caption_request(row: Mapping[str, Any], doc_id: str, image: str, max_tokens: int) -> ChatRequest:
    return ChatRequest(
        key=f"{row['sample_id']}/{doc_id}",
        template=CAPTION_TEMPLATE,
        max_tokens=max_tokens,
        messages=caption_messages(row["question"], image),
    )


def merge_request(row: Mapping[str, Any], from_text: str, from_images: str, max_tokens: int) -> ChatRequest:
    return ChatRequest(
        key=row["sample_id"],
        template=MERGE_TEMPLATE,
        max_tokens=max_tokens,
        messages=merge_messages(row["question"], from_text, from_images),
    )


def shown(answering: Answering, hits: Sequence[Hit], captions: Mapping[str, str | None] | None = None) -> list[dict]:
    """The documents as the model sees them, texts cut to ``doc_chars``; with ``captions``,
    each image document carries its caption (None: it has none)."""
    out = []
    for hit in hits:
        doc = answering.documents[hit.doc_id]
        item = {
            "context_id": hit.doc_id,
            "modality": doc["modality"],
            "text": (doc.get("text") or "")[: answering.doc_chars] or None,
            "image": doc.get("image"),
            "title": doc.get("title"),
        }
        if captions is not None and doc["modality"] == "image":
            item["caption"] = captions.get(hit.doc_id)
        out.append(item)
    return out


def _read_with(reader: Callable[[str, int], Any], count: int, text: str) -> Any:
    return reader(text, count)


def ask_per_count(
    answering: Answering,
    requests: Sequence[ChatRequest],
    counts: Sequence[int],
    reader: Callable[[str, int], Any],
    reminder: Callable[[int], str],
    stage: str,
    expected: Callable[[int], str],
) -> list[Label]:
    """``requests`` asked, each read by ``reader(text, the number of documents it shows)``;
    one batch per number, so a retry's reminder and an error name the documents' range."""
    by_count: dict[int, list[int]] = defaultdict(list)
    for i, count in enumerate(counts):
        by_count[count].append(i)
    out: list[Any] = [None] * len(requests)
    client = answering.pool.client(answering.model)
    for count, positions in by_count.items():
        replies = ask_parsed(
            client,
            [requests[i] for i in positions],
            partial(_read_with, reader, count),
            reminder(count),
            stage,
            expected(count),
        )
        for i, reply in zip(positions, replies):
            out[i] = reply
    return out


def ask_cited(answering: Answering, asks: Sequence[tuple[Mapping[str, Any], list[dict]]], stage: str) -> list[Label]:
    """Each (QA row, documents shown) asked for an answer citing them, read against their number."""
    return ask_per_count(
        answering,
        [answer_request(row, docs, answering.max_tokens) for row, docs in asks],
        [len(docs) for _, docs in asks],
        parse_cited_answer,
        answer_reminder,
        stage,
        lambda n: f"citations of documents 1-{n}",
    )


def cited_ids(
    sentences: Sequence[CitedSentence], hits: Sequence[Hit], offset: int = 0
) -> list[tuple[str, list[str], list[int]]]:
    """(text, cited doc ids, invalid numbers): two numbers of one document (a document two
    queries found) are one citation."""
    return [
        (s.text, list(dict.fromkeys(hits[offset + n - 1].doc_id for n in s.cites)), list(s.invalid)) for s in sentences
    ]


def failure_of(label: Label, step: str) -> tuple[str, str]:
    """(status, error) of a reply that gave no answer."""
    return (FAILED if label.raw[-1] is None else UNREADABLE), f"{step}: {label.error}"


def answer_once(answering: Answering, rows: Sequence[Mapping[str, Any]], hits: Sequence[list[Hit]]) -> list[Answer]:
    """TextRAG, ImageRAG, MultiRAG: one answer over each question's documents."""
    labels = ask_cited(answering, [(row, shown(answering, h)) for row, h in zip(rows, hits)], answering.stage)
    out = []
    for h, label in zip(hits, labels):
        if label.ok:
            out.append(Answer(h, cited_ids(label.label, h), label.raw[-1], ANSWERED))
        else:
            status, error = failure_of(label, "answer")
            out.append(Answer(h, None, label.raw[-1], status, error))
    return out


def captions_of(
    answering: Answering, rows: Sequence[Mapping[str, Any]], images: Sequence[list[Hit]]
) -> list[tuple[dict[str, str | None], str | None]]:
    """Per question its image documents' captions and the first caption call that failed:
    the captioner's, written for the question, or the source's (a stand-in)."""
    if answering.captioner is None:
        return [({h.doc_id: source_caption(answering.documents[h.doc_id]) for h in hits}, None) for hits in images]
    wanted = [(i, h.doc_id) for i, hits in enumerate(images) for h in hits]
    requests = [
        caption_request(rows[i], doc, answering.documents[doc]["image"], answering.caption_max_tokens)
        for i, doc in wanted
    ]
    replies = (
        answering.pool.client(answering.captioner).chat(requests, f"{answering.stage}.caption") if requests else []
    )
    out: list[tuple[dict[str, str | None], str | None]] = [({}, None) for _ in images]
    for (i, doc), reply in zip(wanted, replies):
        captions, error = out[i]
        captions[doc] = (reply.text or "").strip() or None
        if reply.text is None and error is None:
            out[i] = (captions, f"caption of {doc}: model call failed: {reply.error}")
    return out


def _with_citations(sentences: Sequence[CitedSentence], offset: int) -> str:
    """An answer written out again with its citations renumbered by ``offset``."""
    parts = []
    for s in sentences:
        if not s.cites:
            parts.append(s.text)
            continue
        cites = f" [{', '.join(str(n + offset) for n in s.cites)}]"
        end = _END.search(s.text)
        parts.append(s.text[: end.start()] + cites + end.group(0) if end else s.text + cites)
    return " ".join(parts)


def read_combined(text: str, shown_count: int, allowed: set[int]) -> list[CitedSentence] | None:
    """The combined answer, read against the renumbered list; citing a number neither answer
    cites is an error with its reason (retried once)."""
    sentences = parse_cited_answer(text, shown_count)
    if sentences is None:
        return None
    extra = sorted({n for s in sentences for n in s.cites} - allowed)
    if extra:
        raise RecordError(f"it cites {', '.join(map(str, extra))}, which neither answer cites")
    return sentences


def answer_two_step(
    answering: Answering, rows: Sequence[Mapping[str, Any]], text: Sequence[list[Hit]], images: Sequence[list[Hit]]
) -> list[Answer]:
    """Two-step MultiRAG over each question's text and image documents (see the module docstring)."""
    captions = captions_of(answering, rows, images)
    text_asks = [i for i in range(len(rows)) if text[i] or not images[i]]
    image_asks = [i for i in range(len(rows)) if images[i] and captions[i][1] is None]
    text_labels = dict(
        zip(
            text_asks,
            ask_cited(answering, [(rows[i], shown(answering, text[i])) for i in text_asks], f"{answering.stage}.text"),
        )
    )
    image_labels = dict(
        zip(
            image_asks,
            ask_cited(
                answering,
                [(rows[i], shown(answering, images[i], captions[i][0])) for i in image_asks],
                f"{answering.stage}.image",
            ),
        )
    )
    both = [i for i in text_asks if i in image_labels and text_labels[i].ok and image_labels[i].ok]
    merged = dict(
        zip(
            both,
            _combine(
                answering,
                [
                    (rows[i], text_labels[i].label, image_labels[i].label, len(text[i]), len(text[i]) + len(images[i]))
                    for i in both
                ],
            ),
        )
    )
    out = []
    for i in range(len(rows)):
        hits = text[i] + images[i]
        steps = [
            {"step": step, "answer": labels[i].raw[-1], "error": labels[i].error}
            for step, labels in (("text", text_labels), ("image", image_labels))
            if i in labels
        ]
        answer = Answer(hits, None, None, ANSWERED, None, captions[i][0], steps)
        failed = [
            (label, step)
            for step, labels in (("text", text_labels), ("image", image_labels))
            for label in [labels.get(i)]
            if label is not None and not label.ok
        ]
        if captions[i][1] is not None:
            answer.status, answer.error = FAILED, captions[i][1]
        elif failed:
            answer.status, answer.error = failure_of(*failed[0])
        elif i in merged:
            label = merged[i]
            answer.reply = label.raw[-1]
            if label.ok:
                answer.sentences = cited_ids(label.label, hits)
            else:
                answer.status, answer.error = failure_of(label, "combined answer")
        else:  # one modality only: its branch is the answer
            label, offset = (text_labels[i], 0) if i in text_labels else (image_labels[i], len(text[i]))
            answer.reply, answer.sentences = label.raw[-1], cited_ids(label.label, hits, offset)
        out.append(answer)
    return out


def _combine(
    answering: Answering, asks: Sequence[tuple[Mapping[str, Any], list[CitedSentence], list[CitedSentence], int, int]]
) -> list[Label]:
    """The combined answers: per (QA row, text answer, image answer, text documents, all
    documents), read against the question's renumbered documents."""
    requests, parsers = [], []
    for row, from_text, from_images, offset, total in asks:
        allowed = {n for s in from_text for n in s.cites} | {n + offset for s in from_images for n in s.cites}
        requests.append(
            merge_request(
                row, _with_citations(from_text, 0), _with_citations(from_images, offset), answering.max_tokens
            )
        )
        parsers.append(lambda text, total=total, allowed=allowed: read_combined(text, total, allowed))
    if not requests:
        return []
    return ask_parsed(
        answering.pool.client(answering.model),
        requests,
        parsers,
        MERGE_REMINDER,
        f"{answering.stage}.merge",
        "citations of the two answers",
    )
