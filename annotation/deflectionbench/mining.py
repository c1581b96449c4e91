"""Distractor mining: hard text and image negatives that look relevant but do not answer.

Text (:func:`mine_text_negatives`): retrieve the top ``cfg.top_pages`` KB documents for each
sample from the KB's pages (``retrieval.kb_pages``: in memory, or an on-disk store with a
compressed index when the KB outgrows ``cfg.memory_gb``) (question embedding; with an OpenCLIP text encoder and a sample that has images, the
query image embedding instead: image-to-text), cut those pages into passages, drop gold-like
and answer-bearing passages, rerank the rest against the question and keep the best
``cfg.max_text_negatives``.

A passage is *gold-like* when any gold text context of the sample

- has the same context id (a gold passage taken from the same KB), or
- after normalisation (``core.text.normalize``) one of the two texts contains the other, or
- shares at least ``GOLD_OVERLAP`` = 50% of the word 5-grams of the shorter of the two
  (the overlap coefficient of their 5-gram shingle sets): a re-chunked or lightly edited
  copy of the gold passage.

A passage is *answer-bearing* when a normalised gold answer occurs in it as whole words.
Such passages are never distractors: a distractor must not answer the question.

Images (:func:`mine_image_negatives`): image-to-image nearest neighbours over the pool of all
images of the given samples (query images and gold image contexts), excluding the sample's
own query and gold images (by sha256).
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from mmcurate.core.config import RetrievalConfig
from mmcurate.core.errors import MmcurateError
from mmcurate.core.images import ImageStore
from mmcurate.core.records import Context
from mmcurate.core.specs import OpenClip
from mmcurate.core.text import normalize
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
    """A gold text context, pre-normalised for the gold-likeness test."""

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


class DistractorFilter:
    """Admits a passage for one sample unless it is gold-like or answer-bearing (module doc)."""

    def __init__(self, sample: dict[str, Any]) -> None:
        self.answers = [a for a in (normalize(x) for x in sample["answers"]) if a]
        self.gold_ids = {c["context_id"] for c in sample["gold_contexts"]}
        self.gold_texts = [_GoldText(c["text"]) for c in sample["gold_contexts"] if c["modality"] == "text" and c["text"]]

    def admits(self, passage: str, context_id: str) -> bool:
        if context_id in self.gold_ids:
            return False
        norm = normalize(passage)
        padded = f" {norm} "
        if any(f" {answer} " in padded for answer in self.answers):
            return False
        shingles = _shingles(norm.split())
        return not any(gold.resembles(norm, shingles) for gold in self.gold_texts)


def mine_text_negatives(
    samples: pa.Table,
    kb: KBPages,
    cfg: RetrievalConfig,
    store: ImageStore,
) -> dict[str, list[Context]]:
    """Per sample id, up to ``cfg.max_text_negatives`` KB passages, best first (``cfg.reranker``)."""
    rows = samples.select(["sample_id", "question", "answers", "images", "gold_contexts"]).to_pylist()
    if not rows or len(kb) == 0:
        return {row["sample_id"]: [] for row in rows}
    encoder = text_encoder(cfg.text_encoder)
    hits = kb.search(_text_queries(rows, encoder, cfg, store), cfg.top_pages)
    pages = kb.pages(sorted({int(h) for h in hits.ravel() if h >= 0}))  # row -> (doc_id, title, text)
    rerank = reranker(cfg.reranker)
    passages: dict[int, list[str]] = {}
    mined: dict[str, list[Context]] = {}
    for row, found in zip(rows, hits):
        admits = DistractorFilter(row).admits
        candidates: dict[str, Context] = {}  # normalised text -> first context carrying it
        for doc in (int(h) for h in found if h >= 0):
            doc_id, title, text = pages[doc]
            if doc not in passages:
                passages[doc] = chunk_text(text, cfg.chunk_unit, cfg.chunk_size, cfg.chunk_overlap)
            for number, passage in enumerate(passages[doc]):
                context_id = f"kb:{doc_id}#{number}"
                if admits(passage, context_id):
                    candidates.setdefault(
                        normalize(passage),
                        Context(context_id=context_id, modality="text", text=passage, title=title or None),
                    )
        contexts = list(candidates.values())
        scores = rerank.scores(row["question"], [c.text or "" for c in contexts])
        ranked = sorted(zip(scores, contexts), key=lambda sc: (-round(sc[0], SCORE_DECIMALS), sc[1].context_id))
        mined[row["sample_id"]] = [c for _, c in ranked[: cfg.max_text_negatives]]
    return mined


def _text_queries(rows: list[dict[str, Any]], encoder: TextEncoder, cfg: RetrievalConfig, store: ImageStore) -> np.ndarray:
    queries = encoder.encode_text([row["question"] for row in rows])
    if isinstance(cfg.text_encoder, OpenClip):
        cross = cross_modal_encoder(cfg.text_encoder)
        for i, row in enumerate(rows):
            if row["images"]:
                images = cross.encode_images([_read(store, sha, row["sample_id"]) for sha in row["images"]])
                queries[i] = normalise(images.mean(axis=0, keepdims=True))[0]
    return queries


def mine_image_negatives(
    samples: pa.Table, store: ImageStore, cfg: RetrievalConfig, cache_dir: Path
) -> dict[str, list[Context]]:
    """Per sample id, the ``cfg.top_images`` pool images nearest its query images, best first.

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
    index = cached_index(Path(cache_dir), "image-pool", encoder.name, fingerprint, pool, lambda: _encode_pool(encoder, store, pool))
    position = {sha: i for i, sha in enumerate(pool)}
    queried = [sid for sid in mined if own[sid] or gold[sid]]
    if not queried:
        return mined
    queries = np.stack([_mean_vector(index, [position[s] for s in (own[sid] or gold[sid])]) for sid in queried])
    widest = max(len(set(own[sid]) | set(gold[sid])) for sid in queried)
    _, found = index.search(queries, min(len(pool), cfg.top_images + widest))
    for sid, hits in zip(queried, found):
        excluded = set(own[sid]) | set(gold[sid])
        picked = [pool[h] for h in hits if h >= 0 and pool[h] not in excluded][: cfg.top_images]
        mined[sid] = [Context(context_id=f"img:{sha[:16]}", modality="image", image=sha) for sha in picked]
    return mined


def _mean_vector(index: VectorIndex, rows: list[int]) -> np.ndarray:
    return normalise(index.vectors(rows).mean(axis=0, keepdims=True))[0]


def _encode_pool(encoder: ImageEncoder, store: ImageStore, pool: list[str]) -> np.ndarray:
    parts = [encoder.encode_images([store.read(sha) for sha in pool[i : i + IMAGE_BATCH]]) for i in range(0, len(pool), IMAGE_BATCH)]
    return np.concatenate(parts)


def _require(store: ImageStore, sha: str, sample_id: str) -> None:
    if sha not in store:
        raise MmcurateError(f"image {sha[:16]} of sample {sample_id} is not in the image store at {store.root}")


def _read(store: ImageStore, sha: str, sample_id: str) -> bytes:
    _require(store, sha, sample_id)
    return store.read(sha)

