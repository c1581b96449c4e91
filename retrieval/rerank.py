"""Passage rerankers: score passages against one query, higher is more relevant.

- ``MiniLM`` (``minilm``): bi-encoder cosine with all-MiniLM-L6-v2, the embedded default and the
  offline stand-in for the paper's Contriever (no reranker weights ship offline). Passage
  embeddings are memoised by text, since candidate pages recur across the samples of one run.
- ``Contriever`` (``contriever:<folder>``): the reranker of DeflectionBench's mining (seed 003,
  section 3.2), e.g. facebook/contriever-msmarco downloaded to a local folder: a transformers
  BERT encoder whose token embeddings are averaged over the attention mask, query and passage
  scored by their dot product, unnormalised, as ``src/contriever.py`` and the README of
  facebookresearch/contriever define it. Loaded offline from the folder only.
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
from mmcurate.core.specs import Contriever, MiniLM, RerankerSpec, coerce

from .encoders import TextEncoder, text_encoder

MEMO_PASSAGES = 50_000  # 384-d float32: ~75 MB at most


@runtime_checkable
class Reranker(Protocol):
    name: str

    def scores(self, query: str, passages: list[str]) -> list[float]: ...


class BiEncoderReranker:
    """Inner product of query and passage embeddings from one text encoder (the cosine for an
    encoder whose rows are unit length, as every ``retrieval.encoders`` encoder's are)."""

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


class ContrieverEncoder:
    """Contriever's embeddings: BERT token states averaged over the attention mask, not
    normalised (its scores are dot products), inputs cut at the model's 512 positions."""

    def __init__(self, path: Path, batch_size: int = 32) -> None:
        if not path.is_dir():
            raise MmcurateError(f"contriever folder not found: {path}")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from transformers import AutoModel, AutoTokenizer

        try:
            self._tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            self._model = AutoModel.from_pretrained(str(path), local_files_only=True).eval()
        except (OSError, ValueError) as exc:
            raise MmcurateError(
                f"contriever folder {path} holds no transformers encoder: {str(exc).splitlines()[0]}"
            ) from None
        self._torch = torch
        self.max_length = min(512, int(self._model.config.max_position_embeddings))
        self.dim = int(self._model.config.hidden_size)
        self.batch_size = batch_size
        self.name = f"contriever:{path.name}"

    def encode_text(self, texts: list[str]) -> np.ndarray:
        out = [np.zeros((0, self.dim), dtype=np.float32)]
        for start in range(0, len(texts), self.batch_size):
            batch = self._tokenizer(
                texts[start : start + self.batch_size],
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            )
            with self._torch.no_grad():
                states = self._model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
            out.append(((states * mask).sum(dim=1) / mask.sum(dim=1)).numpy().astype(np.float32))
        return np.concatenate(out)


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
        out = self._model.predict(
            [(query, p) for p in passages], batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False
        )
        return np.asarray(out, dtype=float).reshape(len(passages)).tolist()


def reranker(spec: RerankerSpec | str) -> Reranker:
    """The reranker for ``spec``, cached per spec within a process."""
    chosen: RerankerSpec = coerce(RerankerSpec, spec)
    if isinstance(chosen, MiniLM):
        return _bi_encoder()
    if isinstance(chosen, Contriever):
        return _contriever(str(chosen.path.expanduser().resolve()))
    return _cross_encoder(str(chosen.path.expanduser().resolve()))


@cache
def _bi_encoder() -> BiEncoderReranker:
    return BiEncoderReranker(text_encoder(MiniLM()))


@cache
def _contriever(path: str) -> BiEncoderReranker:
    return BiEncoderReranker(ContrieverEncoder(Path(path)))


@cache
def _cross_encoder(path: str) -> CrossEncoderReranker:
    return CrossEncoderReranker(Path(path))
