"""Distractor mining: hard text and image negatives that look relevant, by the strategy each
source takes (seed 003, appendix "Knowledge pairing": "The retrieval modality with highest
performance on each dataset is selected"; ``deflectionbench.mining``, ``core.config.PAPER_MINING``):

- ``image_to_text`` (InfoSeek, ViQuAE; top 10 pages), :func:`mine_text_negatives`: retrieve the
  top pages of the KB (``retrieval.kb_pages``: in memory, or an on-disk store with a compressed
  index when the KB outgrows ``cfg.memory_gb``) for the query image embedded by an OpenCLIP
  text encoder's image tower; with a text-only encoder (MiniLM offline) the question text is the
  query, a stand-in the manifest names (``query_kind``). The pages are cut into passages
  (``cfg.chunk_size`` tokens with ``cfg.chunk_overlap``: 250 and 32 in the paper), the
  leakage rules remove candidates, the rest are reranked against the question and the best
  ``cfg.max_text_negatives`` kept.
- ``image_to_image_pages`` (Encyclopedic-VQA; top 5 pages), :func:`mine_page_image_negatives`:
  the query image against the first image of each KB page (``retrieval.kb.page_image_documents``),
  by the image encoder; the top pages are cut, filtered and reranked as above. A KB whose rows
  name no page image cannot be searched this way: Stage II then retrieves its pages as
  ``image_to_text`` and the manifest says so.
- ``image_to_image`` (MRAG-Bench; top 20), :func:`mine_image_negatives`: the nearest images of
  the source's own pool (its query images and gold image contexts), the sample's own query and
  gold images excluded (eq. 3).
- ``source`` (WebQA, MMDocRAG): no retrieval; the negatives the source provides
  (``annotation.deflectionbench.pairing``).

Which candidates are removed before reranking (``cfg.leakage_filter``; a rule removes a
passage only if no earlier rule did, and every sample's counts per rule are returned for the
ledger):

- ``gold`` (always): the passage *is* a gold context of the sample: the same context id (a
  gold passage taken from the same KB) or the same normalised text (``core.text.normalize``).
  This is the paper's eq. 2, ``Rerank(C(x)) \\ K(x)+`` (seed 003).
- ``answer`` (``leakage_filter: answer`` or ``answer_or_overlap``): a gold answer occurs in
  the passage (``core.text.find_answer``: whole normalised words).
- ``overlap`` (``leakage_filter: answer_or_overlap``): the passage resembles a gold text
  context: after normalisation one of the two texts contains the other, or they share at
  least ``GOLD_OVERLAP`` = 50% of the word 5-grams of the shorter of the two (the overlap
  coefficient of their 5-gram shingle sets): a re-chunked or lightly edited copy.

The default, ``none``, is the paper's: only the gold contexts go, and a distractor that
leaks the answer is left to the distractor-validity check of Stage III (eq. 5:
``annotation.deflectionbench.oracle``), which removes it when a gating model answers
CORRECT with it alone. ``answer`` and ``answer_or_overlap`` are stricter readings that
remove likely leaks before any model sees them.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from mmcurate.benchmarks.deflectionbench import LeakageFilter, RetrievalConfig
from mmcurate.core.errors import MmcurateError
from mmcurate.core.images import ImageStore
from mmcurate.core.records import Context
from mmcurate.core.specs import OpenClip
from mmcurate.core.text import find_answer, normalize
from mmcurate.retrieval.chunking import chunk_text
from mmcurate.retrieval.encoders import (
    ImageEncoder,
    TextEncoder,
    cross_modal_encoder,
    image_encoder,
    normalise,
    text_encoder,
)
from mmcurate.retrieval.kb_pages import KBPages
from mmcurate.retrieval.rerank import reranker
from mmcurate.retrieval.vector_index import VectorIndex, cached_index

GOLD_SHINGLE = 5
GOLD_OVERLAP = 0.5
SCORE_DECIMALS = 5  # ranking ignores float noise below this, then breaks ties by context id
IMAGE_BATCH = 256


def _shingles(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + GOLD_SHINGLE]) for i in range(max(1, len(words) - GOLD_SHINGLE + 1))}


class _GoldText:
    """A gold text context, pre-normalised for the overlap test."""

    def __init__(self, text: str) -> None:
        self.norm = normalize(text)
        self.shingles = _shingles(self.norm.split())

    def resembles(self, norm: str, shingles: set[tuple[str, ...]]) -> bool:
        if not self.norm or not norm:
            return False
        if f" {self.norm} " in f" {norm} " or f" {norm} " in f" {self.norm} ":
            return True
        shared = len(self.shingles & shingles)
        return shared >= GOLD_OVERLAP * min(len(self.shingles), len(shingles))


RULES = ("gold", "answer", "overlap")  # in the order they are tried
LEAKAGE_RULES: dict[str, tuple[str, ...]] = {
    "none": ("gold",),
    "answer": ("gold", "answer"),
    "answer_or_overlap": ("gold", "answer", "overlap"),
}


class DistractorFilter:
    """Names the rule that removes a passage for one sample, or None (see the module docstring)."""

    def __init__(self, sample: dict[str, Any], leakage_filter: LeakageFilter = "none") -> None:
        self.rules = LEAKAGE_RULES[leakage_filter]
        self.answers = list(sample["answers"])
        self.gold_ids = {c["context_id"] for c in sample["gold_contexts"]}
        self.gold_texts = [
            _GoldText(c["text"]) for c in sample["gold_contexts"] if c["modality"] == "text" and c["text"]
        ]

    def removes(self, passage: str, context_id: str) -> str | None:
        norm = normalize(passage)
        if context_id in self.gold_ids or any(gold.norm == norm for gold in self.gold_texts):
            return "gold"
        if "answer" in self.rules and find_answer(passage, self.answers) >= 0:
            return "answer"
        if "overlap" in self.rules:
            shingles = _shingles(norm.split())
            if any(gold.resembles(norm, shingles) for gold in self.gold_texts):
                return "overlap"
        return None


@dataclass
class MinedText:
    """Per sample id: the mined passages, best first, and how many candidate passages the
    top pages gave (``candidates``) and each rule removed (``gold``, ``answer``, ``overlap``)."""

    negatives: dict[str, list[Context]] = field(default_factory=dict)
    filtered: dict[str, dict[str, int]] = field(default_factory=dict)


def mine_text_negatives(
    samples: pa.Table,
    kb: KBPages,
    cfg: RetrievalConfig,
    store: ImageStore,
    top_pages: int,
) -> MinedText:
    """Per sample id, up to ``cfg.max_text_negatives`` passages of its ``top_pages`` KB pages,
    best first (``cfg.reranker``), and the counts of the leakage rules (``cfg.leakage_filter``)."""
    rows = samples.select(["sample_id", "question", "answers", "images", "gold_contexts"]).to_pylist()
    if not rows or len(kb) == 0:
        return _no_pages(rows)
    encoder = text_encoder(cfg.text_encoder)
    hits = kb.search(_text_queries(rows, encoder, cfg, store), top_pages)
    pages = kb.pages(sorted({int(h) for h in hits.ravel() if h >= 0}))  # row -> (doc_id, title, text)
    return _passage_negatives(rows, hits, pages, cfg)


def query_kind(cfg: RetrievalConfig) -> str:
    """What ``image_to_text`` queries the KB with under ``cfg``'s text encoder."""
    if isinstance(cfg.text_encoder, OpenClip):
        return "the query image (the text encoder's image tower; the question for a sample without one)"
    return (
        f"the question text: {text_encoder(cfg.text_encoder).name} embeds no images, a stand-in for the "
        "paper's image-to-text retrieval (set retrieval.text_encoder: open_clip:...)"
    )


def mine_page_image_negatives(
    samples: pa.Table,
    page_docs: list[dict[str, Any]],
    cfg: RetrievalConfig,
    store: ImageStore,
    cache_dir: Path,
    top_pages: int,
) -> MinedText:
    """Per sample id, passages of the ``top_pages`` pages whose first image is nearest the mean
    embedding of its query images (``page_docs``: ``kb.page_image_documents``), filtered and
    reranked as ``mine_text_negatives``; a sample without a query image gets none."""
    rows = samples.select(["sample_id", "question", "answers", "images", "gold_contexts"]).to_pylist()
    if not rows or not page_docs:
        return _no_pages(rows)
    encoder = image_encoder(cfg.image_encoder)
    ids = [doc["doc_id"] for doc in page_docs]
    stats = "\n".join(f"{d['doc_id']}\x1f{d['image']}\x1f{_file_stamp(d['image'])}" for d in page_docs)
    index = cached_index(
        Path(cache_dir),
        "kb-page-images",
        encoder.name,
        hashlib.sha256(stats.encode()).hexdigest(),
        ids,
        lambda: _encode_files(encoder, [d["image"] for d in page_docs]),
    )
    queried = [i for i, row in enumerate(rows) if row["images"]]
    hits = np.full((len(rows), top_pages), -1, dtype=np.int64)
    if queried:
        queries = np.stack(
            [
                normalise(
                    encoder.encode_images([_read(store, sha, rows[i]["sample_id"]) for sha in rows[i]["images"]]).mean(
                        axis=0, keepdims=True
                    )
                )[0]
                for i in queried
            ]
        )
        found = index.search(queries, min(top_pages, len(page_docs)))[1]
        hits[queried, : found.shape[1]] = found
    pages = {i: (doc["doc_id"], doc["title"], doc["text"]) for i, doc in enumerate(page_docs)}
    return _passage_negatives(rows, hits, pages, cfg)


def _file_stamp(path: Path) -> str:
    try:
        stat = Path(path).stat()
    except OSError as exc:
        raise MmcurateError(f"KB page image {path}: {exc.strerror}") from None
    return f"{stat.st_size}:{stat.st_mtime_ns}"


def _encode_files(encoder: ImageEncoder, paths: list[Path]) -> np.ndarray:
    parts = [
        encoder.encode_images([Path(p).read_bytes() for p in paths[i : i + IMAGE_BATCH]])
        for i in range(0, len(paths), IMAGE_BATCH)
    ]
    return np.concatenate(parts)


def _no_pages(rows: list[dict[str, Any]]) -> MinedText:
    empty = {rule: 0 for rule in ("candidates", *RULES)}
    return MinedText({row["sample_id"]: [] for row in rows}, {row["sample_id"]: dict(empty) for row in rows})


def _passage_negatives(
    rows: list[dict[str, Any]], hits: np.ndarray, pages: dict[int, tuple[str, str, str]], cfg: RetrievalConfig
) -> MinedText:
    """Each row's retrieved pages (``hits``, -1: none) cut into passages, the leakage rules
    applied, the rest reranked against the question; the best ``cfg.max_text_negatives`` kept."""
    empty = {rule: 0 for rule in ("candidates", *RULES)}
    rerank = reranker(cfg.reranker)
    passages: dict[int, list[str]] = {}
    mined = MinedText()
    for row, found in zip(rows, hits):
        removes = DistractorFilter(row, cfg.leakage_filter).removes
        counts: Counter[str] = Counter(empty)
        candidates: dict[str, Context] = {}  # normalised text -> first context carrying it
        for doc in (int(h) for h in found if h >= 0):
            doc_id, title, text = pages[doc]
            if doc not in passages:
                passages[doc] = chunk_text(text, cfg.chunk_unit, cfg.chunk_size, cfg.chunk_overlap)
            for number, passage in enumerate(passages[doc]):
                context_id = f"kb:{doc_id}#{number}"
                counts["candidates"] += 1
                rule = removes(passage, context_id)
                if rule is not None:
                    counts[rule] += 1
                    continue
                candidates.setdefault(
                    normalize(passage),
                    Context(context_id=context_id, modality="text", text=passage, title=title or None),
                )
        contexts = list(candidates.values())
        scores = rerank.scores(row["question"], [c.text or "" for c in contexts])
        ranked = sorted(zip(scores, contexts), key=lambda sc: (-round(sc[0], SCORE_DECIMALS), sc[1].context_id))
        mined.negatives[row["sample_id"]] = [c for _, c in ranked[: cfg.max_text_negatives]]
        mined.filtered[row["sample_id"]] = dict(counts)
    return mined


def _text_queries(
    rows: list[dict[str, Any]], encoder: TextEncoder, cfg: RetrievalConfig, store: ImageStore
) -> np.ndarray:
    queries = encoder.encode_text([row["question"] for row in rows])
    if isinstance(cfg.text_encoder, OpenClip):
        cross = cross_modal_encoder(cfg.text_encoder)
        for i, row in enumerate(rows):
            if row["images"]:
                images = cross.encode_images([_read(store, sha, row["sample_id"]) for sha in row["images"]])
                queries[i] = normalise(images.mean(axis=0, keepdims=True))[0]
    return queries


def mine_image_negatives(
    samples: pa.Table, store: ImageStore, cfg: RetrievalConfig, cache_dir: Path, top_images: int
) -> dict[str, list[Context]]:
    """Per sample id, the ``top_images`` pool images nearest its query images, best first
    (the pool: the images of ``samples``, one source's).

    The query is the mean embedding of the sample's images, or of its gold images when it has
    none (text-only queries such as WebQA's); samples with neither get no image negatives.
    """
    rows = samples.select(["sample_id", "images", "gold_contexts"]).to_pylist()
    own = {row["sample_id"]: list(dict.fromkeys(row["images"])) for row in rows}
    gold = {
        row["sample_id"]: [c["image"] for c in row["gold_contexts"] if c["modality"] == "image" and c["image"]]
        for row in rows
    }
    pool = sorted({sha for shas in (*own.values(), *gold.values()) for sha in shas})
    mined: dict[str, list[Context]] = {row["sample_id"]: [] for row in rows}
    if not pool:
        return mined
    for row in rows:
        for sha in own[row["sample_id"]] + gold[row["sample_id"]]:
            _require(store, sha, row["sample_id"])
    encoder = image_encoder(cfg.image_encoder)
    fingerprint = hashlib.sha256("\n".join(pool).encode()).hexdigest()
    index = cached_index(
        Path(cache_dir), "image-pool", encoder.name, fingerprint, pool, lambda: _encode_pool(encoder, store, pool)
    )
    position = {sha: i for i, sha in enumerate(pool)}
    queried = [sid for sid in mined if own[sid] or gold[sid]]
    if not queried:
        return mined
    queries = np.stack([_mean_vector(index, [position[s] for s in (own[sid] or gold[sid])]) for sid in queried])
    widest = max(len(set(own[sid]) | set(gold[sid])) for sid in queried)
    _, found = index.search(queries, min(len(pool), top_images + widest))
    for sid, hits in zip(queried, found):
        excluded = set(own[sid]) | set(gold[sid])
        picked = [pool[h] for h in hits if h >= 0 and pool[h] not in excluded][:top_images]
        mined[sid] = [Context(context_id=f"img:{sha[:16]}", modality="image", image=sha) for sha in picked]
    return mined


def _mean_vector(index: VectorIndex, rows: list[int]) -> np.ndarray:
    return normalise(index.vectors(rows).mean(axis=0, keepdims=True))[0]


def _encode_pool(encoder: ImageEncoder, store: ImageStore, pool: list[str]) -> np.ndarray:
    parts = [
        encoder.encode_images([store.read(sha) for sha in pool[i : i + IMAGE_BATCH]])
        for i in range(0, len(pool), IMAGE_BATCH)
    ]
    return np.concatenate(parts)


def _require(store: ImageStore, sha: str, sample_id: str) -> None:
    if sha not in store:
        raise MmcurateError(f"image {sha[:16]} of sample {sample_id} is not in the image store at {store.root}")


def _read(store: ImageStore, sha: str, sample_id: str) -> bytes:
    _require(store, sha, sample_id)
    return store.read(sha)
