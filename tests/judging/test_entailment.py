"""Entailment: an NLI model loaded from a tiny saved checkpoint, and the lexical stand-in."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmcurate.core.errors import MmcurateError
from mmcurate.judging.entailment import LexicalEntailment, NliEntailment, entailment_judge

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
    "is",
    "on",
    "sofa",
    "sleeps",
    "not",
    "orbits",
    "earth",
    ".",
]


def tiny_nli(folder: Path, id2label: dict[int, str]) -> Path:
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
        num_labels=len(id2label),
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
    )
    model = BertForSequenceClassification(config)
    with torch.no_grad():  # make the entailment logit dominate, so the verdict is known
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(
            torch.tensor([5.0 if "entail" in id2label[i].lower() else 0.0 for i in range(len(id2label))])
        )
    model.save_pretrained(folder)
    return folder


def test_nli_model_finds_entailment_label_and_scores_pairs(tmp_path: Path) -> None:
    path = tiny_nli(tmp_path / "mnli", {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"})
    model = NliEntailment(path)
    assert model.name == "nli:mnli" and model.entail_index == 2
    premises = ["the cat sleeps on the sofa ."] * 20  # more than one batch
    out = model.entails(premises, ["the cat is on the sofa ."] * 20)
    assert len(out) == 20
    verdict, score = out[0]
    assert verdict is True and isinstance(score, float)
    assert score == pytest.approx(1 / (1 + 2 * 2.718281828**-5), rel=1e-4)  # softmax of (0, 0, 5)
    strict = NliEntailment(path, threshold=0.999)
    assert strict.entails(["the moon orbits the earth ."], ["the cat sleeps ."]) == [
        (False, pytest.approx(score, rel=1e-4))
    ]


def test_nli_label_detection_rejects_models_without_entailment(tmp_path: Path) -> None:
    binary = tiny_nli(tmp_path / "rte", {0: "entailment", 1: "not_entailment"})
    assert NliEntailment(binary).entail_index == 0
    sentiment = tiny_nli(tmp_path / "sst", {0: "NEGATIVE", 1: "POSITIVE"})
    with pytest.raises(MmcurateError, match="no single entailment label"):
        NliEntailment(sentiment)
    with pytest.raises(MmcurateError, match="folder not found"):
        NliEntailment(tmp_path / "missing")
    with pytest.raises(MmcurateError, match="one premise per hypothesis"):
        NliEntailment(binary).entails(["a"], [])


def test_lexical_stand_in() -> None:
    model = LexicalEntailment()
    assert model.name == "lexical-overlap-v1"
    premise = "The Saturn V rocket launched the Apollo 11 astronauts to the Moon in July 1969."
    out = model.entails(
        [premise] * 3,
        [
            "Apollo 11 launched on a Saturn V rocket.",
            "The Moon landing happened in 1969.",
            "Coffee beans are roasted seeds.",
        ],
    )
    assert [v for v, _ in out] == [True, False, False]
    assert out[0][1] == 1.0
    assert out[1][1] == pytest.approx(2 / 4)  # moon, 1969 found; landing, happened missing
    assert out[2][1] == 0.0
    assert model.entails(["anything"], ["the of a"]) == [(False, 0.0)]  # nothing to support


def test_spec_names_the_judge(tmp_path: Path) -> None:
    assert entailment_judge("lexical").name == "lexical-overlap-v1"
    with pytest.raises(MmcurateError, match="needs a model pool"):
        entailment_judge("llm:judge")
    with pytest.raises(MmcurateError, match="NLI model folder not found"):
        entailment_judge(f"nli:{tmp_path / 'missing'}")
