"""Passage rerankers: score passages against one query, higher is more relevant.

- ``MiniLM`` (``minilm``): bi-encoder cosine with all-MiniLM-L6-v2, the embedded default (no
  reranker weights are available offline). Passage embeddings are memoised by text, since
  candidate pages recur across the samples of one run.
- ``CrossEncoder`` (``cross-encoder:<path>``): a sentence-transformers ``CrossEncoder`` with a
  single relevance output (e.g. ms-marco-MiniLM-L-6-v2), loaded from a local folder.
"""
from __future__ import annotations

import os
from collections import OrderedDict
from functools import cache
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from mmcurate.core.errors import MmcurateError
from mmcurate.core.specs import MiniLM, RerankerSpec, coerce

from .encoders import TextEncoder, text_encoder

MEMO_PASSAGES = 50_000  # 384-d float32: ~75 MB at most


@runtime_checkable
class Reranker(Protocol):
    name: str

    def scores(self, query: str, passages: list[str]) -> list[float]: ...


class BiEncoderReranker:
    """Cosine similarity of query and passage embeddings from one text encoder."""

    def __init__(self, encoder: TextEncoder) -> None:
        self.encoder = encoder
        self.name = f"bi-encoder:{encoder.name}"
        self._memo: OrderedDict[str, np.ndarray] = OrderedDict()

    def scores(self, query: str, passages: list[str]) -> list[float]:
        if not passages:
            return []
        missing = list(dict.fromkeys(p for p in passages if p not in self._memo))
        if missing:
            for text, vector in zip(missing, self.encoder.encode_text(missing)):
                self._memo[text] = vector
        for text in passages:
            self._memo.move_to_end(text)
        while len(self._memo) > MEMO_PASSAGES:
            self._memo.popitem(last=False)
        matrix = np.stack([self._memo[p] for p in passages])
        return (matrix @ self.encoder.encode_text([query])[0]).astype(float).tolist()


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder scoring (query, passage) pairs jointly."""

    def __init__(self, path: Path, batch_size: int = 16) -> None:
        if not path.is_dir():
            raise MmcurateError(f"cross-encoder folder not found: {path}")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        from sentence_transformers import CrossEncoder

        self._model = CrossEncoder(str(path), device="cpu", local_files_only=True)
        labels = int(self._model.model.config.num_labels)
        if labels != 1:
            raise MmcurateError(f"cross-encoder {path} has {labels} outputs; a reranker needs one relevance score")
        self.batch_size = batch_size
        self.name = f"cross-encoder:{path.name}"

    def scores(self, query: str, passages: list[str]) -> list[float]:
        if not passages:
            return []
        out = self._model.predict([(query, p) for p in passages], batch_size=self.batch_size, convert_to_numpy=True,
                                  show_progress_bar=False)
        return np.asarray(out, dtype=float).reshape(len(passages)).tolist()


def reranker(spec: RerankerSpec | str) -> Reranker:
    """The reranker for ``spec``, cached per spec within a process."""
    spec = coerce(RerankerSpec, spec)
    if isinstance(spec, MiniLM):
        return _bi_encoder()
    return _cross_encoder(str(spec.path.expanduser().resolve()))


@cache
def _bi_encoder() -> BiEncoderReranker:
    return BiEncoderReranker(text_encoder(MiniLM()))


@cache
def _cross_encoder(path: str) -> CrossEncoderReranker:
    return CrossEncoderReranker(Path(path))
