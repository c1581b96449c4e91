"""Retrieval for a RAG run over a release's knowledge base: top-N candidates, reranked.

``RagCorpus`` holds the knowledge base (DOCUMENT-shaped rows: text and image documents)
and answers ``rank(queries)``: per query the ``candidates`` (default 100) nearest documents,
reordered by the reranker, best first, as ``Hit(doc_id, modality, score)``. ``retrieve``
cuts each ranking at a fixed ``k`` (RefLVQA's top-5), or with a cutoff
(``retrieval.cutoffs``: CRUISE's MAD rule) on the ranking's scores (``score_scale``: cosines,
or a cross-encoder's sigmoid scores; a fused two-modality ranking has no score scale, so it
takes no cutoff). ``first_stage`` is the ranking before reranking (what NDCG@10 and
Recall@100 measure, as in the paper's Table 4).

- Text documents are found with the text encoder (FAISS, cached per corpus and encoder)
  and reranked with the reranker (``title. text`` passages). A bi-encoder reranker over the
  retrieval encoder itself (the offline default, ``minilm`` for both) would only recompute
  the first stage's cosines, so its reranking is the first-stage order; the components
  name both, so a reader sees that nothing was reranked.
- Image documents can only be found from a text query through a cross-modal encoder
  (``cross_modal``); without one they are not retrievable and ``image_note`` says so. Their
  first-stage score is the query-image similarity, which no text reranker can improve.
- With both modalities the two rankings are fused by reciprocal rank (score
  ``1 / (60 + rank)`` summed over the lists a document appears in; Cormack et al. 2009), since
  a reranker score and a cross-modal cosine are not on one scale. With one modality the
  score is that modality's own (the reranker's, or the first stage's).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mmcurate.core.errors import MmcurateError
from mmcurate.core.specs import CutoffSpec

from .cutoffs import Scale, apply_cutoff
from .encoders import CrossModalEncoder, TextEncoder
from .kb import kb_fingerprint
from .rerank import CrossEncoderReranker, Reranker
from .vector_index import VectorIndex, cached_index

CANDIDATES = 100
RRF_K = 60


@dataclass(frozen=True)
class Hit:
    doc_id: str
    modality: str  # "text" | "image"
    score: float


def passage(title: str | None, text: str) -> str:
    """A text document as the encoders see it (the same form the citation stage indexed)."""
    return f"{title}. {text}" if title and not text.startswith(title) else text


def _search(index: VectorIndex, queries: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
    k = min(k, len(index))
    if k < 1 or len(queries) == 0:
        return [[] for _ in range(len(queries))]
    scores, rows = index.search(queries, k)
    return [[(int(r), float(s)) for r, s in zip(rs, ss) if r >= 0] for rs, ss in zip(rows, scores)]


def _fuse(rankings: Sequence[list[Hit]]) -> list[Hit]:
    """Reciprocal-rank fusion of several rankings, best first (ties by doc id)."""
    scores: dict[str, float] = {}
    modality: dict[str, str] = {}
    for ranking in rankings:
        for rank, hit in enumerate(ranking, 1):
            scores[hit.doc_id] = scores.get(hit.doc_id, 0.0) + 1.0 / (RRF_K + rank)
            modality[hit.doc_id] = hit.modality
    order = sorted(scores, key=lambda d: (-scores[d], d))
    return [Hit(d, modality[d], scores[d]) for d in order]


class RagCorpus:
    """A knowledge base ready for ``rank``: text index, optional image index, reranker."""

    def __init__(
        self,
        documents: pa.Table,  # doc_id, modality, text, image (sha256), title
        index_dir: Path,
        text_encoder: TextEncoder,
        reranker: Reranker,
        cross_modal: CrossModalEncoder | None = None,
        read_image: Callable[[str], bytes] | None = None,  # sha256 -> bytes; needed with cross_modal
        candidates: int = CANDIDATES,
    ) -> None:
        text_table = documents.filter(pc.equal(documents["modality"], "text"))
        self.text_docs = text_table.select(["doc_id", "title", "text"]).to_pylist()
        self.image_docs = documents.filter(pc.equal(documents["modality"], "image")).select(
            ["doc_id", "image"]).to_pylist()
        self.passages = [passage(r["title"], r["text"] or "") for r in self.text_docs]
        self._position = {r["doc_id"]: i for i, r in enumerate(self.text_docs)}
        self.text_encoder = text_encoder
        self.reranker = reranker
        self.cross_modal = cross_modal
        self.candidates = candidates
        self.text_index = cached_index(
            index_dir, "reflvqa-text", text_encoder.name, kb_fingerprint(text_table),
            [r["doc_id"] for r in self.text_docs], lambda: text_encoder.encode_text(self.passages),
        ) if self.text_docs else None
        self.image_index: VectorIndex | None = None
        if cross_modal is not None and self.image_docs:
            if read_image is None:
                raise MmcurateError("image retrieval needs read_image to load the image documents")
            shas = [r["image"] for r in self.image_docs]
            self.image_index = cached_index(
                index_dir, "reflvqa-images", cross_modal.name, "\n".join(shas), [r["doc_id"] for r in self.image_docs],
                lambda: cross_modal.encode_images([read_image(sha) for sha in shas]),
            )

    @property
    def image_note(self) -> str | None:
        """Why image documents cannot be retrieved, or None."""
        if self.image_docs and self.image_index is None:
            return (f"{len(self.image_docs)} image documents in the knowledge base are not retrievable: "
                    "no cross-modal encoder configured")
        return None

    @property
    def components(self) -> dict[str, str]:
        return {"retriever": self.text_encoder.name, "reranker": self.reranker.name,
                "image_retriever": self.cross_modal.name if self.image_index is not None else "none"}

    @property
    def score_scale(self) -> Scale | None:
        """The scale of ``rank``'s scores: ``cosine`` (first stage or bi-encoder), ``unit`` (a
        cross-encoder: sentence-transformers puts a sigmoid on a one-score head), None for
        text and image rankings fused by rank (reciprocal-rank scores say nothing absolute)."""
        if self.image_index is not None:
            return None if self.text_index is not None else "cosine"
        return "unit" if isinstance(self.reranker, CrossEncoderReranker) else "cosine"

    def first_stage(self, queries: list[str], k: int | None = None) -> list[list[Hit]]:
        """The ``k`` (default ``candidates``) nearest documents per query before reranking, best first."""
        k = k or self.candidates
        text = self._text_hits(queries, k)
        image = self._image_hits(queries, k)
        if self.image_index is None:
            return text
        if self.text_index is None:
            return image
        return [_fuse([t, i])[:k] for t, i in zip(text, image)]

    def rank(self, queries: list[str]) -> list[list[Hit]]:
        """The first stage's candidates reordered by the reranker, best first."""
        text = [self._rerank(q, hits) for q, hits in zip(queries, self._text_hits(queries, self.candidates))]
        image = self._image_hits(queries, self.candidates)
        if self.image_index is None:
            return text
        if self.text_index is None:
            return image
        return [_fuse([t, i])[:self.candidates] for t, i in zip(text, image)]

    def _text_hits(self, queries: list[str], k: int) -> list[list[Hit]]:
        if self.text_index is None:
            return [[] for _ in queries]
        found = _search(self.text_index, self.text_encoder.encode_text(queries), k)
        return [[Hit(self.text_docs[row]["doc_id"], "text", score) for row, score in hits] for hits in found]

    def _image_hits(self, queries: list[str], k: int) -> list[list[Hit]]:
        if self.image_index is None or self.cross_modal is None:
            return [[] for _ in queries]
        found = _search(self.image_index, self.cross_modal.encode_text(queries), k)
        return [[Hit(self.image_docs[row]["doc_id"], "image", score) for row, score in hits] for hits in found]

    def _rerank(self, query: str, hits: list[Hit]) -> list[Hit]:
        if not hits or self.reranker.name == f"bi-encoder:{self.text_encoder.name}":
            return hits
        scores = self.reranker.scores(query, [self.passages[self._position[h.doc_id]] for h in hits])
        ranked = sorted(zip(hits, scores), key=lambda pair: -pair[1])
        return [Hit(h.doc_id, h.modality, float(s)) for h, s in ranked]


def cut_ranking(ranking: list[Hit], k: int, cutoff: CutoffSpec | None = None,
                scale: Scale | None = "cosine") -> list[Hit]:
    """The hits shown from one ranking: its top ``k`` (the paper's fixed cutoff, K = 5), or
    what ``cutoff`` keeps of it, scores read on ``scale``."""
    if cutoff is None:
        return ranking[:k]
    if scale is None:
        raise MmcurateError(f"cutoff {cutoff}: text and image rankings fused by reciprocal rank have no score "
                            "scale to cut on; leave the cutoff unset (the fixed top-k) or retrieve one modality")
    return [hit for hit, _ in apply_cutoff([(h, h.score) for h in ranking], cutoff, scale).kept]


def retrieve(queries: list[str], corpus: RagCorpus, k: int, cutoff: CutoffSpec | None = None) -> list[list[Hit]]:
    """Each query's reranked ranking cut by ``cut_ranking``."""
    return [cut_ranking(ranking, k, cutoff, corpus.score_scale) for ranking in corpus.rank(queries)]
