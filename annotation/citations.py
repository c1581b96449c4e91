"""RefLVQA stage 4 (seed paper 3.3): supporting documents for every fact-checkable sentence.

For each fact-checkable sentence:

- text: the ``top_text`` nearest documents of the text corpus (a KB spec for ``load_kb``)
  from a FAISS index built once per corpus fingerprint and encoder (``cached_index``);
- images: the ``top_images`` nearest images of the image corpus, text-to-image, which needs
  a cross-modal encoder. Without one (or without an image corpus, or without an image
  entailment model to judge them) image citations are skipped and the result says why;
  nothing is faked.

A retrieved document is cited only when an entailment judge says the document (premise)
supports the sentence (hypothesis):

- text judge ``"lexical"`` (the embedded stand-in), ``"nli:<path>"``, an ``Entailment``
  object, or ``"llm:<model>"``: a yes/no prompt; when the backend returns top logprobs the
  first token decides (P(yes) vs P(no), summed over case/space variants), else the answer
  text is parsed strictly with one retry;
- image judge: a vision model name, asked the same yes/no question with the image part.

Every judged pair is a ledger row (check ``citation.text`` / ``citation.image``,
``context_id`` = doc id, verdict ``entail``/``reject``/``error``, model = the judge, detail
with the score). A judge failure is never a citation. A fact-checkable sentence left with
no citation is flagged (``flagged=True`` and a ``citation.flag`` ledger row).

Output ``kept``: the input samples with ``sentences`` rewritten as
``list<struct{index, text, fact_checkable, text_citations, image_citations, flagged}>``;
``knowledge_base``: the whole retrieval corpus (text and image documents) with provenance.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from mmcurate.core.errors import MmcurateError
from mmcurate.core.images import ImageStore
from mmcurate.core.ledger import Decision
from mmcurate.core.stages import StageResult

from .necessity import ask_labels, first_token_label
from .relevance import resolve_cross_modal

STAGE = "citation"
CHECK_TEXT = "citation.text"
CHECK_IMAGE = "citation.image"
CHECK_FLAG = "citation.flag"
CHECK_SAMPLE = "citation.sample"
TEXT_TEMPLATE = "reflvqa.citation.text.v1"
IMAGE_TEMPLATE = "reflvqa.citation.image.v1"
TEXT_SYSTEM = (
    "You check whether a document supports a statement. Answer yes when the document states "
    "the statement or clearly implies it; answer no when the document does not say it or "
    "contradicts it. Reply with exactly one word: yes or no."
)
IMAGE_SYSTEM = (
    "You check whether an image supports a statement. Answer yes when the image clearly shows "
    "what the statement says; answer no otherwise. Reply with exactly one word: yes or no."
)
REMINDER = "Your reply could not be read. Reply with exactly one word: yes or no."
LOGPROBS = 5
JUDGE_MAX_TOKENS = 4
DOC_CHARS = 4000  # a premise longer than this is cut for the LLM judge

SENTENCE = pa.struct(
    [
        pa.field("index", pa.int32(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("fact_checkable", pa.bool_(), nullable=False),
        pa.field("text_citations", pa.list_(pa.string()), nullable=False),
        pa.field("image_citations", pa.list_(pa.string()), nullable=False),
        pa.field("flagged", pa.bool_(), nullable=False),
    ]
)
KNOWLEDGE_BASE = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("modality", pa.string(), nullable=False),
        pa.field("text", pa.string()),
        pa.field("image", pa.string()),
        pa.field("title", pa.string()),
        pa.field("provenance", pa.string(), nullable=False),  # JSON: corpus spec, original id
    ]
)


@dataclass(kw_only=True)
class CitationResult(StageResult):
    knowledge_base: pa.Table | None = None
    text_judge: str | None = None
    image_judge: str | None = None
    image_skipped: str | None = None  # why image citations were not made, else None


def image_doc_id(sha: str) -> str:
    return f"image:{sha}"


# ---------------------------------------------------------------------------- judges
def first_token_decision(response: Any) -> tuple[str, float] | None:
    """yes/no from the first generated token's top logprobs, or None when neither appears."""
    return first_token_label(response, ("yes", "no"))


class LLMEntailment:
    """``Entailment`` over a chat model: one yes/no question per (premise, hypothesis)."""

    def __init__(self, pool: Any, model: str, stage: str = STAGE) -> None:
        self.pool = pool
        self.model = model
        self.stage = stage
        self.name = f"llm:{model}"

    def judge(self, premises: list[str], hypotheses: list[str], keys: list[str] | None = None) -> list[Any]:
        from mmcurate.gating.requests import ChatRequest

        keys = keys or [str(i) for i in range(len(premises))]
        requests = [
            ChatRequest(
                key=key,
                messages=[
                    {"role": "system", "content": TEXT_SYSTEM},
                    {"role": "user", "content": (
                        f"Document: {premise[:DOC_CHARS]}\n\nStatement: {hypothesis}\n"
                        "Does the document support the statement? Reply with exactly one word: yes or no."
                    )},
                ],
                template=TEXT_TEMPLATE, max_tokens=JUDGE_MAX_TOKENS, logprobs=LOGPROBS,
            )
            for key, premise, hypothesis in zip(keys, premises, hypotheses)
        ]
        if not requests:
            return []
        return ask_labels(self.pool.client(self.model), requests, ("yes", "no"), REMINDER, self.stage, first_token_decision)

    def entails(self, premises: list[str], hypotheses: list[str]) -> list[tuple[bool, float]]:
        """Protocol form; a failed judgement raises (use ``judge`` to keep errors apart)."""
        out = []
        for label in self.judge(premises, hypotheses):
            if not label.ok:
                raise MmcurateError(f"{self.name}: {label.error}")
            out.append((label.label == "yes", label.score if label.score is not None else float(label.label == "yes")))
        return out


def text_judge(spec: Any, pool: Any) -> Any:
    """The text entailment judge for ``spec``: an Entailment object, lexical, nli:<path>, llm:<model>."""
    if not isinstance(spec, str):
        if not (hasattr(spec, "entails") and hasattr(spec, "name")):
            raise MmcurateError("a text entailment judge needs name and entails()")
        return spec
    from .entailment import lexical_entailment, nli_entailment

    if spec == "lexical":
        return lexical_entailment()
    if spec.startswith("lexical:"):  # lexical:<threshold>, the share of sentence words a document must hold
        try:
            return lexical_entailment(float(spec.removeprefix("lexical:")))
        except ValueError:
            raise MmcurateError(f"text entailment {spec!r}: the threshold must be a number") from None
    if spec.startswith("nli:") and spec[4:]:
        return nli_entailment(spec[4:])
    if spec.startswith("llm:") and spec[4:]:
        if pool is None:
            raise MmcurateError(f"text entailment {spec!r} needs a model pool")
        return LLMEntailment(pool, spec[4:])
    raise MmcurateError(f"unknown text entailment {spec!r}; use 'lexical[:<threshold>]', 'nli:<path>' or 'llm:<model>'")


def _judge_text(judge: Any, premises: list[str], hypotheses: list[str], keys: list[str]) -> list[tuple[str, float | None, dict]]:
    """(verdict entail/reject/error, score, extra detail) per pair."""
    if not premises:
        return []
    if isinstance(judge, LLMEntailment):
        out = []
        for label in judge.judge(premises, hypotheses, keys):
            if not label.ok:
                out.append(("error", None, {"error": label.error, "raw": label.raw}))
            else:
                score = label.score if label.score is not None else None
                how = "logprobs" if label.score is not None else "text"
                out.append(("entail" if label.label == "yes" else "reject", score, {"raw": label.raw, "decided_by": how}))
        return out
    return [("entail" if ok else "reject", float(score), {}) for ok, score in judge.entails(premises, hypotheses)]


def _judge_images(pool: Any, model: str, shas: list[str], hypotheses: list[str], keys: list[str]) -> list[Any]:
    from mmcurate.gating.requests import ChatRequest

    requests = [
        ChatRequest(
            key=key,
            messages=[
                {"role": "system", "content": IMAGE_SYSTEM},
                {"role": "user", "content": [
                    {"type": "image", "sha256": sha},
                    {"type": "text", "text": (
                        f"Statement: {hypothesis}\n"
                        "Does the image support the statement? Reply with exactly one word: yes or no."
                    )},
                ]},
            ],
            template=IMAGE_TEMPLATE, max_tokens=JUDGE_MAX_TOKENS, logprobs=LOGPROBS,
        )
        for key, sha, hypothesis in zip(keys, shas, hypotheses)
    ]
    if not requests:
        return []
    return ask_labels(pool.client(model), requests, ("yes", "no"), REMINDER, STAGE, first_token_decision)


# ---------------------------------------------------------------------------- retrieval
def _text_encoder(spec: Any) -> Any:
    if isinstance(spec, str):
        from .encoders import text_encoder

        return text_encoder(spec)
    return spec


def _doc_text(title: str, text: str) -> str:
    return f"{title}. {text}" if title and not text.startswith(title) else text


def _search(index: Any, queries: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
    k = min(k, len(index))
    if k < 1 or len(queries) == 0:
        return [[] for _ in range(len(queries))]
    scores, rows = index.search(queries, k)
    return [[(int(r), float(s)) for r, s in zip(rs, ss) if r >= 0] for rs, ss in zip(rows, scores)]


def images_fingerprint(shas: list[str]) -> str:
    return hashlib.sha256("\n".join(shas).encode("ascii")).hexdigest()


# ---------------------------------------------------------------------------- stage
def cite(
    samples: pa.Table,
    corpus: str | pa.Table,
    corpus_limit: int | None = None,
    image_corpus: list[str] | None = None,
    store: ImageStore | None = None,
    text_encoder: Any = "minilm",
    cross_modal: Any = None,
    top_text: int = 5,
    top_images: int = 5,
    text_entailment: Any = "lexical",
    image_entailment: str | None = None,
    pool: Any = None,
    cache_dir: Path | str = Path(".mmcurate/indexes"),
    run_id: str | None = None,
    corpus_name: str | None = None,
    image_corpus_name: str = "post-images",
) -> CitationResult:
    """Retrieve and entailment-check supporting documents for every fact-checkable sentence.

    ``samples``: the fact-checkable stage's ``kept`` table (with a ``sentences`` column).
    ``corpus``: a KB spec (``load_kb``) or a ready KB table (doc_id, title, text; then
    ``corpus_name`` names it in provenance). ``image_corpus``: image sha256s in ``store``.
    """
    from .kb import kb_fingerprint, load_kb
    from .vector_index import cached_index

    if "sentences" not in samples.column_names:
        raise MmcurateError("cite needs the fact-checkable stage's output (a 'sentences' column)")
    if isinstance(corpus, str):
        kb, corpus_spec = load_kb(corpus, corpus_limit), corpus
    else:
        kb, corpus_spec = corpus, corpus_name or "table"
    cache_dir = Path(cache_dir)
    rows = samples.to_pylist()
    # (row, sentence index, text) of every sentence that needs support
    wanted = [
        (r, s["index"], s["text"]) for r in rows for s in r["sentences"] if s["fact_checkable"]
    ]
    judge = text_judge(text_entailment, pool)
    decisions: list[Decision] = []
    text_cites: dict[tuple[str, int], list[str]] = {}
    image_cites: dict[tuple[str, int], list[str]] = {}

    # -- text
    doc_ids = kb["doc_id"].to_pylist()
    titles = kb["title"].to_pylist()
    texts = kb["text"].to_pylist()
    if wanted and doc_ids and top_text > 0:
        encoder = _text_encoder(text_encoder)
        index = cached_index(
            cache_dir, "reflvqa-text", encoder.name, kb_fingerprint(kb), doc_ids,
            lambda: encoder.encode_text([_doc_text(t, x) for t, x in zip(titles, texts)]),
        )
        hits = _search(index, encoder.encode_text([w[2] for w in wanted]), top_text)
        pairs = [(w, rank, pos, score) for w, found in zip(wanted, hits) for rank, (pos, score) in enumerate(found, 1)]
        verdicts = _judge_text(
            judge,
            [_doc_text(titles[p], texts[p]) for _, _, p, _ in pairs],
            [w[2] for w, _, _, _ in pairs],
            [f"{w[0]['sample_id']}/s{w[1]}/{doc_ids[p]}" for w, _, p, _ in pairs],
        )
        for (w, rank, pos, retrieval), (verdict, score, extra) in zip(pairs, verdicts):
            row, i, _ = w
            if verdict == "entail":
                text_cites.setdefault((row["sample_id"], i), []).append(doc_ids[pos])
            decisions.append(Decision(
                row["sample_id"], STAGE, CHECK_TEXT, verdict, model=judge.name, context_id=doc_ids[pos],
                detail={"sentence": i, "score": score, "rank": rank, "retrieval_score": retrieval,
                        "encoder": encoder.name, **extra},
            ))

    # -- images
    image_ids: list[str] = []
    skipped = None
    if image_entailment is None:
        skipped = "no image entailment model configured"
    elif cross_modal is None:
        skipped = "no cross-modal encoder configured: text-to-image retrieval impossible"
    elif not image_corpus:
        skipped = "empty image corpus"
    elif store is None:
        raise MmcurateError("image citations need the image store")
    if image_corpus and store is not None:
        image_ids = sorted({sha for sha in image_corpus if sha in store})
    if skipped is None and pool is not None:
        spec = pool.settings.model(image_entailment)
        if not spec.vision:
            raise MmcurateError(f"image entailment model {image_entailment!r} cannot see images (vision: false)")
    elif skipped is None:
        raise MmcurateError("image entailment needs a model pool")
    if skipped is None and wanted and image_ids and top_images > 0:
        xenc = resolve_cross_modal(cross_modal)
        index = cached_index(
            cache_dir, "reflvqa-images", xenc.name, images_fingerprint(image_ids), image_ids,
            lambda: xenc.encode_images([store.read(sha) for sha in image_ids]),
        )
        hits = _search(index, xenc.encode_text([w[2] for w in wanted]), top_images)
        pairs = [(w, rank, pos, score) for w, found in zip(wanted, hits) for rank, (pos, score) in enumerate(found, 1)]
        try:
            labels = _judge_images(
                pool, image_entailment, [image_ids[p] for _, _, p, _ in pairs], [w[2] for w, _, _, _ in pairs],
                [f"{w[0]['sample_id']}/s{w[1]}/{image_doc_id(image_ids[p])}" for w, _, p, _ in pairs],
            )
        finally:
            pool.release(image_entailment)
        for (w, rank, pos, retrieval), label in zip(pairs, labels):
            row, i, _ = w
            doc = image_doc_id(image_ids[pos])
            verdict = "error" if not label.ok else ("entail" if label.label == "yes" else "reject")
            if verdict == "entail":
                image_cites.setdefault((row["sample_id"], i), []).append(doc)
            detail: dict[str, Any] = {"sentence": i, "score": label.score, "rank": rank, "retrieval_score": retrieval,
                                      "encoder": xenc.name, "raw": label.raw}
            if label.error:
                detail["error"] = label.error
            decisions.append(Decision(
                row["sample_id"], STAGE, CHECK_IMAGE, verdict, model=image_entailment, context_id=doc, detail=detail,
            ))
    if isinstance(judge, LLMEntailment):
        pool.release(judge.model)

    # -- assemble
    column: list[list[dict]] = []
    counts = {"input": len(rows), "kept": len(rows), "sentences": len(wanted), "flagged": 0,
              "text_citations": 0, "image_citations": 0}
    for row in rows:
        sid = row["sample_id"]
        entries = []
        for s in row["sentences"]:
            key = (sid, s["index"])
            t, im = text_cites.get(key, []), image_cites.get(key, [])
            flagged = bool(s["fact_checkable"]) and not t and not im
            entries.append({"index": s["index"], "text": s["text"], "fact_checkable": bool(s["fact_checkable"]),
                            "text_citations": t, "image_citations": im, "flagged": flagged})
            counts["text_citations"] += len(t)
            counts["image_citations"] += len(im)
            if flagged:
                counts["flagged"] += 1
                decisions.append(Decision(sid, STAGE, CHECK_FLAG, "flagged", context_id=f"s{s['index']}",
                                          detail={"sentence": s["index"], "reason": "no supporting document"}))
        column.append(entries)
        decisions.append(Decision(sid, STAGE, CHECK_SAMPLE, "keep", model=judge.name, detail={
            "flagged": sum(e["flagged"] for e in entries),
            "cited_sentences": sum(bool(e["text_citations"] or e["image_citations"]) for e in entries),
            "image_citations": "skipped: " + skipped if skipped else "made",
        }))
    kept = samples.drop_columns(["sentences"]).append_column("sentences", pa.array(column, type=pa.list_(SENTENCE)))
    knowledge_base = _knowledge_base(kb, corpus_spec, image_ids, image_corpus_name)
    return CitationResult(
        stage=STAGE, kept=kept, decisions=decisions, run_id=run_id or "", counts=counts,
        extra={"text_judge": judge.name, "image_judge": image_entailment if skipped is None else None},
        knowledge_base=knowledge_base, text_judge=judge.name,
        image_judge=image_entailment if skipped is None else None, image_skipped=skipped,
    )


def _knowledge_base(kb: pa.Table, corpus_spec: str, image_ids: list[str], image_corpus_name: str) -> pa.Table:
    rows = [
        {"doc_id": d, "modality": "text", "text": x, "image": None, "title": t,
         "provenance": json.dumps({"corpus": corpus_spec, "id": d}, sort_keys=True)}
        for d, t, x in zip(kb["doc_id"].to_pylist(), kb["title"].to_pylist(), kb["text"].to_pylist())
    ]
    rows += [
        {"doc_id": image_doc_id(sha), "modality": "image", "text": None, "image": sha, "title": None,
         "provenance": json.dumps({"corpus": image_corpus_name, "id": sha}, sort_keys=True)}
        for sha in image_ids
    ]
    return pa.Table.from_pylist(rows, schema=KNOWLEDGE_BASE)
