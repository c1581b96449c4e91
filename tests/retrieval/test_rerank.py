"""Rerankers: the MiniLM bi-encoder default, and Contriever and a CrossEncoder loaded from tiny saved models."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmcurate.core.errors import MmcurateError
from mmcurate.retrieval.rerank import reranker

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "the",
    "a",
    "cat",
    "moon",
    "rocket",
    "coffee",
    "is",
    "on",
    "sleeps",
    "sofa",
    "what",
    "where",
    "launched",
    ".",
    "?",
]


def tiny_bert(folder: Path, num_labels: int) -> Path:
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    BertTokenizer(str(folder / "vocab.txt")).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=num_labels,
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    return folder


def tiny_encoder(folder: Path) -> Path:
    """A BERT encoder folder shaped like facebook/contriever-msmarco (BertModel weights + tokenizer)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    BertTokenizer(str(folder / "vocab.txt")).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    BertModel(config, add_pooling_layer=False).save_pretrained(folder)
    return folder


def contriever_scores(folder: Path, query: str, passages: list[str]) -> list[float]:
    """Contriever's scoring written out as facebookresearch/contriever does it (src/contriever.py:
    last hidden states zeroed at padding, summed, divided by the mask length; README: dot product)."""
    import torch
    from transformers import AutoTokenizer, BertModel

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = BertModel.from_pretrained(folder, add_pooling_layer=False).eval()
    inputs = tokenizer([query, *passages], padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**inputs).last_hidden_state
    hidden = hidden.masked_fill(~inputs["attention_mask"][..., None].bool(), 0.0)
    emb = hidden.sum(dim=1) / inputs["attention_mask"].sum(dim=1)[..., None]
    return (emb[1:] @ emb[0]).tolist()


def test_contriever_scores_mean_pooled_dot_products(tmp_path: Path) -> None:
    path = tiny_encoder(tmp_path / "contriever-msmarco")
    rerank = reranker(f"contriever:{path}")
    assert rerank is reranker(f"contriever:{path}") and rerank.name == "bi-encoder:contriever:contriever-msmarco"
    query, passages = "where is the cat ?", ["the cat sleeps on the sofa .", "the rocket launched .", "coffee"]
    scores = rerank.scores(query, passages)
    assert scores == pytest.approx(contriever_scores(path, query, passages), rel=1e-4, abs=1e-5)
    norms = [abs(s) for s in scores]
    assert max(norms) > 1.0 + 1e-3  # unnormalised embeddings: dot products, not cosines
    assert rerank.scores(query, ["coffee"]) == pytest.approx([scores[2]], rel=1e-4, abs=1e-5)  # padding is masked
    with pytest.raises(MmcurateError, match="contriever folder not found"):
        reranker(f"contriever:{tmp_path / 'missing'}")
    (tmp_path / "empty").mkdir()
    with pytest.raises(MmcurateError, match="holds no transformers encoder"):
        reranker(f"contriever:{tmp_path / 'empty'}")


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
    with pytest.raises(MmcurateError, match="unknown spec 'bm25'.*'contriever:<folder>'"):
        reranker("bm25")
