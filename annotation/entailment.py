"""Does a premise (a retrieved or cited passage) entail a hypothesis (a claim or answer sentence)?

- :func:`nli_entailment`: a real NLI model (e.g. a DeBERTa/RoBERTa MNLI checkpoint) loaded with
  transformers from a local folder; the entailment class is found in ``config.id2label``.
- :func:`lexical_entailment`: the embedded stand-in used when no NLI weights exist. It is NOT
  entailment: it only checks that the hypothesis's content words occur in the premise, so it
  misses paraphrase and cannot see negation or contradiction ("X is not Y" supports "X is Y").
  Releases record its name, ``lexical-overlap-v1``, so nobody mistakes it for an NLI model.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Protocol, runtime_checkable

from mmcurate.core.errors import MmcurateError

NLI_THRESHOLD = 0.5
LEXICAL_THRESHOLD = 0.75
STOPWORDS = frozenset(
    """a an the and or but if then of in on at to for from by with as is are was were be been being
    this that these those it its it's he she they them his her their there here what which who whom
    whose when where why how do does did done has have had having not no so such than too very can
    could should would will shall may might must into onto over under about above below between
    also just only own same other some any each all both few more most s i you we our your my me us""".split()
)
_TOKEN = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")


@runtime_checkable
class Entailment(Protocol):
    name: str

    def entails(self, premises: list[str], hypotheses: list[str]) -> list[tuple[bool, float]]: ...


def _check_pairs(premises: list[str], hypotheses: list[str]) -> None:
    if len(premises) != len(hypotheses):
        raise MmcurateError(f"entailment needs one premise per hypothesis, got {len(premises)} and {len(hypotheses)}")


class NliEntailment:
    """A sequence-classification NLI model: P(entailment) per (premise, hypothesis) pair."""

    def __init__(self, path: Path, threshold: float = NLI_THRESHOLD, batch_size: int = 16) -> None:
        if not path.is_dir():
            raise MmcurateError(f"NLI model folder not found: {path}")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        try:
            self._tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            self._model = AutoModelForSequenceClassification.from_pretrained(str(path), local_files_only=True).eval()
        except (OSError, ValueError) as exc:
            raise MmcurateError(f"cannot load NLI model from {path}: {str(exc).splitlines()[0]}") from None
        labels = {int(i): str(label) for i, label in self._model.config.id2label.items()}
        found = [i for i, label in labels.items() if "entail" in label.lower() and "not" not in label.lower()]
        if len(found) != 1:
            raise MmcurateError(f"NLI model {path} has no single entailment label in id2label {labels}")
        self._torch = torch
        self.entail_index = found[0]
        self.threshold = threshold
        self.batch_size = batch_size
        self.name = f"nli:{path.name}"

    def entails(self, premises: list[str], hypotheses: list[str]) -> list[tuple[bool, float]]:
        _check_pairs(premises, hypotheses)
        out: list[tuple[bool, float]] = []
        with self._torch.inference_mode():
            for start in range(0, len(premises), self.batch_size):
                end = start + self.batch_size
                batch = self._tokenizer(
                    premises[start:end], hypotheses[start:end], padding=True, truncation=True, return_tensors="pt"
                )
                probs = self._model(**batch).logits.float().softmax(dim=-1)[:, self.entail_index]
                out += [(p >= self.threshold, p) for p in probs.tolist()]
        return out


def nli_entailment(path: str, threshold: float = NLI_THRESHOLD) -> Entailment:
    return NliEntailment(Path(path).expanduser(), threshold)


def content_tokens(text: str) -> set[str]:
    """Lower-cased words and numbers minus stopwords, with a plural -s folded away."""
    tokens = set()
    for token in _TOKEN.findall(text.lower()):
        if token in STOPWORDS:
            continue
        if len(token) > 3 and token.endswith("s") and not token.endswith("ss") and not token[0].isdigit():
            token = token[:-1]
        tokens.add(token)
    return tokens


class LexicalEntailment:
    """Stand-in: score = share of the hypothesis's content tokens found in the premise."""

    def __init__(self, threshold: float = LEXICAL_THRESHOLD) -> None:
        self.threshold = threshold
        self.name = "lexical-overlap-v1" + ("" if threshold == LEXICAL_THRESHOLD else f"@{threshold:g}")

    def entails(self, premises: list[str], hypotheses: list[str]) -> list[tuple[bool, float]]:
        _check_pairs(premises, hypotheses)
        out: list[tuple[bool, float]] = []
        for premise, hypothesis in zip(premises, hypotheses):
            wanted = content_tokens(hypothesis)
            score = len(wanted & content_tokens(premise)) / len(wanted) if wanted else 0.0
            out.append((score >= self.threshold, score))
        return out


def lexical_entailment(threshold: float = LEXICAL_THRESHOLD) -> Entailment:
    return LexicalEntailment(threshold)
