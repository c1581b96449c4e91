"""Retrieval for a RAG run over a release's knowledge base: top-N candidates, reranked.

``RagCorpus`` holds the knowledge base (DOCUMENT-shaped rows: text and image documents)
and answers ``rank(queries, searched, images)``: per query the ``candidates`` (default 100)
nearest documents of the ``searched`` modalities (text, image, or both), reordered by the
reranker, best first, as ``Hit(doc_id, modality, score)``. ``retrieve`` cuts each ranking at
a fixed ``k`` (RefLVQA's top-5 per query), or with a cutoff (``retrieval.cutoffs``: CRUISE's
MAD rule) on the ranking's scores (``score_scale``: cosines, or a cross-encoder's sigmoid
scores; a two-modality ranking fused by reciprocal rank has no score scale, so it takes no
cutoff). ``first_stage`` is the ranking before reranking (what NDCG@10 and Recall@100 measure,
as in the paper's Table 4; two modalities' first stages, scored by two encoders, are fused by
reciprocal rank there).

- Text documents are found with the text encoder (FAISS, cached per corpus and encoder, embedded
  resumably with progress lines: ``resumable_index``).
- Image documents are found through a cross-modal encoder (``cross_modal``, e.g. OpenCLIP)
  over their pixels. Without one they are found by the caption their source gives them
  (title, alt text: ``source_caption``) with the text encoder, a stand-in that ``notes``
  names; an image document without such a caption then cannot be found, and ``notes``
  counts them.
- The query: with ``query_embedding="average"`` (the seed paper's best retriever, MM-Embed
  "with averaged query embedding of text and images", Table 4), an index whose encoder also
  embeds images is searched with the mean of the unit query-text vector and the unit mean
  vector of the question's images, renormalised; a text-only encoder (MiniLM) embeds the
  query text alone, and ``notes`` says so. ``"text"`` embeds the query text alone everywhere.
- Reranking (``fusion``). ``"rerank"`` (the default; seed 004, 5.1: "after the retriever finds
  out the top-100 documents, from which the reranker selects the top-K documents", one
  multimodal reranker, jina-reranker-m0): one stage scores every candidate of the searched
  modalities on one scale, a text document by its passage (``title. text``), an image document
  by its source caption (the stand-in for a reranker that reads pixels; ``notes`` names it),
  and orders them by that score, so how many text and image documents a top K holds follows
  the scores and varies per query. With both modalities searched the candidates are each
  modality's top ``candidates``. An image document without a caption has nothing the reranker
  can read: it is in no reranked ranking, and ``notes`` counts such documents. ``"rrf"`` (the
  earlier reading): text candidates reranked, image candidates in their first-stage order, the
  two fused by reciprocal rank (score ``1 / (60 + rank)`` summed over the lists a document
  appears in; Cormack et al. 2009): a score with no scale, so a fused ranking takes no cutoff.
  A bi-encoder reranker over the retrieval encoder itself (the offline default, ``minilm`` for
  both) would only recompute the first stage's cosines of the same texts (passages; captions
  when images are found by caption), so those are kept as its scores; the components name
  both, so a reader sees that nothing was reordered within a modality.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mmcurate.core.errors import MmcurateError
from mmcurate.core.specs import CutoffSpec

from .cutoffs import Scale, apply_cutoff
from .encoders import CrossModalEncoder, TextEncoder, normalise
from .kb import kb_fingerprint
from .rerank import CrossEncoderReranker, Reranker
from .resumable_index import resumable_index
from .vector_index import VectorIndex, top_hits
from .vector_store import Progress, to_stderr

CANDIDATES = 100
RRF_K = 60
Fusion = Literal["rerank", "rrf"]
TEXT, IMAGE = "text", "image"
BOTH = (TEXT, IMAGE)
QueryEmbedding = Literal["average", "text"]


@dataclass(frozen=True)
class Hit:
    doc_id: str
    modality: str  # "text" | "image"
    score: float


def passage(title: str | None, text: str) -> str:
    """A text document as the encoders see it (the same form the citation stage indexed)."""
    return f"{title}. {text}" if title and not text.startswith(title) else text


def source_caption(doc: Mapping[str, Any]) -> str | None:
    """The caption an image document's source gives it (its title, then its alt text), or None."""
    parts = [part.strip() for part in (doc.get("title"), doc.get("text")) if part and part.strip()]
    return ". ".join(parts) or None


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
    """A knowledge base ready for ``rank``: text index, image index (pixels or captions), reranker."""

    def __init__(
        self,
        documents: pa.Table,  # doc_id, modality, text, image (sha256), title
        index_dir: Path,
        text_encoder: TextEncoder,
        reranker: Reranker,
        cross_modal: CrossModalEncoder | None = None,
        read_image: Callable[[str], bytes] | None = None,  # sha256 -> bytes; needed to embed images
        candidates: int = CANDIDATES,
        query_embedding: QueryEmbedding = "average",
        progress: Progress = to_stderr,  # embedding and index-building progress lines
        fusion: Fusion = "rerank",  # how text and image candidates become one ranking (module docstring)
    ) -> None:
        text_table = documents.filter(pc.equal(documents["modality"], TEXT))
        self.text_docs = text_table.select(["doc_id", "title", "text"]).to_pylist()
        images = documents.filter(pc.equal(documents["modality"], IMAGE)).select(["doc_id", "image", "title", "text"])
        self.passages = [passage(r["title"], r["text"] or "") for r in self.text_docs]
        self.text_encoder = text_encoder
        self.reranker = reranker
        self.candidates = candidates
        self.query_embedding = query_embedding
        self.read_image = read_image
        self.fusion = fusion
        captions = {r["doc_id"]: caption for r in images.to_pylist() if (caption := source_caption(r)) is not None}
        self.image_uncaptioned = images.num_rows - len(captions)
        # what the reranker reads of each document: a text document's passage, an image's source caption
        self._read_by_reranker = {**{r["doc_id"]: p for r, p in zip(self.text_docs, self.passages)}, **captions}
        self._image_vectors: dict[tuple[str, str], np.ndarray] = {}
        self.text_index = (
            resumable_index(
                index_dir,
                "reflvqa-text",
                text_encoder.name,
                text_encoder.dim,
                kb_fingerprint(text_table),
                [r["doc_id"] for r in self.text_docs],
                self.passages,
                text_encoder.encode_text,
                progress,
            )
            if self.text_docs
            else None
        )
        self.image_total = images.num_rows
        self.image_index: VectorIndex | None = None
        self.image_encoder: TextEncoder | None = None
        self.image_by_caption = cross_modal is None
        if cross_modal is not None and images.num_rows:
            if read_image is None:
                raise MmcurateError("image retrieval needs read_image to load the image documents")
            self.image_docs = images.select(["doc_id", "image"]).to_pylist()
            shas = [r["image"] for r in self.image_docs]
            self.image_encoder = cross_modal
            self.image_index = resumable_index(
                index_dir,
                "reflvqa-images",
                cross_modal.name,
                cross_modal.dim,
                "\n".join(shas),
                [r["doc_id"] for r in self.image_docs],
                shas,
                lambda batch: cross_modal.encode_images([read_image(sha) for sha in batch]),
                progress,
            )
        else:  # the stand-in: the captions the source gives the image documents, as text
            self.image_docs = [r for r in images.to_pylist() if source_caption(r)]
            caption_texts = [source_caption(r) or "" for r in self.image_docs]
            if self.image_docs:
                self.image_encoder = text_encoder
                self.image_index = resumable_index(
                    index_dir,
                    "reflvqa-image-captions",
                    text_encoder.name,
                    text_encoder.dim,
                    kb_fingerprint(pa.Table.from_pylist(self.image_docs).select(["doc_id", "title", "text"])),
                    [r["doc_id"] for r in self.image_docs],
                    caption_texts,
                    text_encoder.encode_text,
                    progress,
                )
        if read_image is None and any(self._averages(e) for e in (text_encoder, self.image_encoder) if e is not None):
            raise MmcurateError("an averaged query embedding needs read_image to load the question's images")

    def _averages(self, encoder: TextEncoder) -> bool:
        """Whether queries to an index of ``encoder`` average the query text with the question's images."""
        return self.query_embedding == "average" and hasattr(encoder, "encode_images")

    @property
    def notes(self) -> list[str]:
        """How each modality is found, in words (stand-ins and documents nobody can find named)."""
        out = []
        if self.image_total and self.image_by_caption:
            missing = self.image_total - len(self.image_docs)
            out.append(
                f"image documents: no cross-modal encoder configured; a stand-in finds them by the caption "
                f"their source gives them (title, alt text) with {self.text_encoder.name}; {missing} of "
                f"{self.image_total} image documents carry no caption and cannot be retrieved"
            )
        for modality, encoder in ((TEXT, self.text_encoder if self.text_index else None), (IMAGE, self.image_encoder)):
            if encoder is None:
                continue
            if self._averages(encoder):
                how = "the mean of the query-text and question-image embeddings"
            elif self.query_embedding == "average":
                how = f"the query text alone ({encoder.name} embeds no images, so no averaged query embedding)"
            else:
                how = "the query text alone (query_embedding: text)"
            out.append(f"{modality} documents searched with {how}")
        if self.fusion == "rrf":
            out.append(
                "fusion: rrf: text candidates reranked, image candidates in their first-stage order; with both "
                "modalities searched the two rankings are fused by reciprocal rank, 1 / (60 + rank)"
            )
        elif self.image_total:
            out.append(
                f"fusion: rerank: one reranking stage ({self.reranker.name}) scores the candidates of every "
                "searched modality on one scale, text documents by their passage and image documents by the "
                "caption their source gives them (title, alt text), a stand-in for the paper's multimodal "
                "reranker (jina-reranker-m0 reads the pixels), and keeps the top K by score; "
                f"{self.image_uncaptioned} of {self.image_total} image documents carry no caption, so the "
                "reranker cannot score them and no ranking shows them"
            )
        return out

    @property
    def components(self) -> dict[str, str]:
        image = (
            "none"
            if self.image_index is None
            else f"captions:{self.text_encoder.name}"
            if self.image_by_caption
            else getattr(self.image_encoder, "name", "")
        )
        return {"retriever": self.text_encoder.name, "reranker": self.reranker.name, "image_retriever": image}

    def score_scale(self, searched: Sequence[str] = BOTH) -> Scale | None:
        """The scale of ``rank``'s scores over ``searched``: the reranker's, ``cosine`` (a
        bi-encoder) or ``unit`` (a cross-encoder: sentence-transformers puts a sigmoid on a
        one-score head); with ``fusion="rrf"``, first-stage cosines for images alone and None
        for text and image rankings fused by rank (reciprocal-rank scores say nothing absolute)."""
        reranked: Scale = "unit" if isinstance(self.reranker, CrossEncoderReranker) else "cosine"
        if self.fusion == "rerank":
            return reranked
        text = TEXT in searched and self.text_index is not None
        image = IMAGE in searched and self.image_index is not None
        if text and image:
            return None
        return "cosine" if image else reranked

    def first_stage(
        self,
        queries: list[str],
        searched: Sequence[str] = BOTH,
        images: Sequence[Sequence[str]] = (),
        k: int | None = None,
    ) -> list[list[Hit]]:
        """The ``k`` (default ``candidates``) nearest documents of ``searched`` per query before
        reranking, best first; ``images[i]``: the sha256s of query i's question images."""
        k = k or self.candidates
        text = self._text_hits(queries, images, k) if TEXT in searched else None
        image = self._image_hits(queries, images, k) if IMAGE in searched else None
        return self._join(queries, text, image, k)

    def rank(
        self, queries: list[str], searched: Sequence[str] = BOTH, images: Sequence[Sequence[str]] = ()
    ) -> list[list[Hit]]:
        """The first stage's candidates reordered by the reranker, best first (``fusion``:
        the module docstring)."""
        empty: list[list[Hit]] = [[] for _ in queries]
        text = self._text_hits(queries, images, self.candidates) if TEXT in searched else None
        image = self._image_hits(queries, images, self.candidates) if IMAGE in searched else None
        if self.fusion == "rerank":
            return [
                self._rerank(q, t + i)[: self.candidates] for q, t, i in zip(queries, text or empty, image or empty)
            ]
        text = [self._rerank(q, hits) for q, hits in zip(queries, text)] if text is not None else None
        return self._join(queries, text, image, self.candidates)

    def _join(
        self, queries: list[str], text: list[list[Hit]] | None, image: list[list[Hit]] | None, k: int
    ) -> list[list[Hit]]:
        """One ranking of text and image hits: fused by reciprocal rank when both were searched."""
        if text is not None and image is not None and self.text_index is not None and self.image_index is not None:
            return [_fuse([t, i])[:k] for t, i in zip(text, image)]
        if text is not None and self.text_index is not None:
            return text
        return image if image is not None else [[] for _ in queries]

    def _queries(self, encoder: TextEncoder, queries: list[str], images: Sequence[Sequence[str]]) -> np.ndarray:
        """Query vectors for an index of ``encoder`` (see the module docstring)."""
        vectors = normalise(encoder.encode_text(queries))
        if not self._averages(encoder) or not any(images):
            return vectors
        for i, shas in enumerate(images):
            if shas:
                seen = np.mean([self._image_vector(encoder, sha) for sha in shas], axis=0)
                vectors[i] = normalise((vectors[i] + normalise(seen[None, :])[0])[None, :])[0]
        return vectors

    def _image_vector(self, encoder: Any, sha: str) -> np.ndarray:
        key = (encoder.name, sha)
        if key not in self._image_vectors:
            assert self.read_image is not None  # checked in __init__
            self._image_vectors[key] = encoder.encode_images([self.read_image(sha)])[0]
        return self._image_vectors[key]

    def _text_hits(self, queries: list[str], images: Sequence[Sequence[str]], k: int) -> list[list[Hit]]:
        if self.text_index is None:
            return [[] for _ in queries]
        found = top_hits(self.text_index, self._queries(self.text_encoder, queries, images), k)
        return [[Hit(self.text_docs[row]["doc_id"], TEXT, score) for row, score in hits] for hits in found]

    def _image_hits(self, queries: list[str], images: Sequence[Sequence[str]], k: int) -> list[list[Hit]]:
        if self.image_index is None or self.image_encoder is None:
            return [[] for _ in queries]
        found = top_hits(self.image_index, self._queries(self.image_encoder, queries, images), k)
        return [[Hit(self.image_docs[row]["doc_id"], IMAGE, score) for row, score in hits] for hits in found]

    def _rerank(self, query: str, hits: list[Hit]) -> list[Hit]:
        """``hits`` by the reranker's score of what it reads of each (a passage, an image's
        caption), best first, ties in the order given; hits it can read nothing of are left out."""
        readable = [h for h in hits if h.doc_id in self._read_by_reranker]
        if self._first_stage_scores_are_reranks(readable):
            scores = [h.score for h in readable]
        else:
            scores = self.reranker.scores(query, [self._read_by_reranker[h.doc_id] for h in readable])
        ranked = sorted(zip(readable, scores), key=lambda pair: -pair[1])
        return [Hit(h.doc_id, h.modality, float(s)) for h, s in ranked]

    def _first_stage_scores_are_reranks(self, hits: list[Hit]) -> bool:
        """Whether the reranker is the bi-encoder of the encoder that found ``hits`` by the same
        texts it would read (passages; captions when images are found by caption)."""
        return self.reranker.name == f"bi-encoder:{self.text_encoder.name}" and all(
            h.modality == TEXT or self.image_by_caption for h in hits
        )


def cut_ranking(
    ranking: list[Hit], k: int, cutoff: CutoffSpec | None = None, scale: Scale | None = "cosine"
) -> list[Hit]:
    """The hits shown from one ranking: its top ``k`` (the paper's fixed cutoff, K = 5), or
    what ``cutoff`` keeps of it, scores read on ``scale``."""
    if cutoff is None:
        return ranking[:k]
    if scale is None:
        raise MmcurateError(
            f"cutoff {cutoff}: text and image rankings fused by reciprocal rank have no score "
            "scale to cut on; leave the cutoff unset (the fixed top-k) or retrieve one modality"
        )
    return [hit for hit, _ in apply_cutoff([(h, h.score) for h in ranking], cutoff, scale).kept]


def retrieve(
    queries: list[str],
    corpus: RagCorpus,
    k: int,
    cutoff: CutoffSpec | None = None,
    searched: Sequence[str] = BOTH,
    images: Sequence[Sequence[str]] = (),
) -> list[list[Hit]]:
    """Each query's reranked ranking over ``searched`` cut by ``cut_ranking``."""
    scale = corpus.score_scale(searched)
    return [cut_ranking(ranking, k, cutoff, scale) for ranking in corpus.rank(queries, searched, images)]
