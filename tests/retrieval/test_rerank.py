"""Rerankers: the MiniLM bi-encoder default and a CrossEncoder loaded from a tiny saved model."""
from __future__ import annotations

from pathlib import Path

import pytest

from mmcurate.retrieval.rerank import reranker
from mmcurate.core.errors import MmcurateError

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat", "moon", "rocket", "coffee", "is", "on", "sleeps", "sofa", "what", "where", "launched", ".", "?"]


def tiny_bert(folder: Path, num_labels: int) -> Path:
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    BertTokenizer(str(folder / "vocab.txt")).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64, num_labels=num_labels)
    BertForSequenceClassification(config).save_pretrained(folder)
    return folder


def test_minilm_bi_encoder_ranks_the_relevant_passage_first() -> None:
    rerank = reranker("minilm")
    assert rerank is reranker("minilm")
    assert rerank.name == "bi-encoder:sentence-transformers/all-MiniLM-L6-v2"
    passages = [
        "Espresso is made by forcing hot water through finely ground coffee.",
        "The Saturn V rocket launched the Apollo astronauts towards the Moon.",
        "Cats sleep for twelve to sixteen hours a day.",
    ]
    scores = rerank.scores("Which rocket carried astronauts to the Moon?", passages)
    assert len(scores) == 3 and all(isinstance(s, float) for s in scores)
    assert max(range(3), key=scores.__getitem__) == 1
    assert rerank.scores("Which rocket carried astronauts to the Moon?", passages) == scores  # memoised, identical
    assert rerank.scores("anything", []) == []


def test_cross_encoder_loads_a_local_model(tmp_path: Path) -> None:
    path = tiny_bert(tmp_path / "ce", num_labels=1)
    rerank = reranker(f"cross-encoder:{path}")
    assert rerank.name == "cross-encoder:ce"
    scores = rerank.scores("where is the cat ?", ["the cat sleeps on the sofa .", "the rocket launched .", "coffee"])
    assert len(scores) == 3 and all(isinstance(s, float) for s in scores)
    assert len(set(scores)) == 3  # the pair really is scored jointly
    assert rerank.scores("where is the cat ?", ["coffee"]) == pytest.approx([scores[2]], abs=1e-5)


def test_cross_encoder_errors(tmp_path: Path) -> None:
    with pytest.raises(MmcurateError, match="folder not found"):
        reranker(f"cross-encoder:{tmp_path / 'missing'}")
    path = tiny_bert(tmp_path / "nli", num_labels=3)
    with pytest.raises(MmcurateError, match="needs one relevance score"):
        reranker(f"cross-encoder:{path}")
    with pytest.raises(MmcurateError, match="unknown spec 'bm25'"):
        reranker("bm25")
