"""Does a premise (a retrieved document) support a hypothesis (a claim or answer sentence)?

Every judge answers ``judge(premises, hypotheses, keys) -> list[Support]`` with a verdict
``entail``, ``reject`` or ``error`` per pair (an error is never a citation):

- ``LexicalEntailment`` (spec ``lexical[:<threshold>]``): the embedded stand-in used when no
  NLI weights exist. It is NOT entailment: the score is the share of the hypothesis's
  content words (``core.text.content_tokens``) found in the premise, so it misses paraphrase
  and cannot see negation ("X is not Y" supports "X is Y"). Releases record its name,
  ``lexical-overlap-v1``, so nobody mistakes it for an NLI model.
- ``NliEntailment`` (spec ``nli:<folder>``): a transformers sequence-classification NLI model
  (e.g. a DeBERTa/RoBERTa MNLI checkpoint) from a local folder; the entailment class is
  found in ``config.id2label``.
- ``LLMEntailment`` (spec ``llm:<model>``): a chat model of the config asked yes/no through
  ``models.labels`` (first-token logprobs when the backend gives them, else the strict text
  parse with one retry).

``image_support`` asks a vision model the same yes/no question about an image document.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from mmcurate.core.errors import MmcurateError
from mmcurate.core.specs import LLM, NLI, EntailmentSpec, Lexical, coerce
from mmcurate.core.text import content_tokens
from mmcurate.models.client import ModelPool
from mmcurate.models.labels import Label, ask_labels, first_token_label, label_request
from mmcurate.models.requests import ChatRequest

NLI_THRESHOLD = 0.5
LEXICAL_THRESHOLD = 0.75
YES_NO = ("yes", "no")
DOC_CHARS = 4000  # a premise longer than this is cut for a model judge
TEXT_TEMPLATE = "reflvqa.citation.text.v1"
IMAGE_TEMPLATE = "reflvqa.citation.image.v1"
TEXT_SYSTEM = (
    "You check whether a document supports a statement. Answer yes when the document states "
    "the statement or clearly implies it; answer no when the document does not say it or "
    "contradicts it. Reply with exactly one word: yes or no."
)
IMAGE_SYSTEM = (
    "You check whether an image supports a statement. Answer yes when the image clearly shows "
    "what the statement says; answer no otherwise. Reply with exactly one word: yes or no."
)
REMINDER = "Your reply could not be read. Reply with exactly one word: yes or no."


@dataclass(frozen=True)
class Support:
    """One judged (premise, hypothesis) pair."""

    verdict: str  # "entail" | "reject" | "error"
    score: float | None
    detail: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class EntailmentJudge(Protocol):
    name: str

    def judge(self, premises: list[str], hypotheses: list[str], keys: list[str]) -> list[Support]: ...


def _check_pairs(premises: list[str], hypotheses: list[str]) -> None:
    if len(premises) != len(hypotheses):
        raise MmcurateError(f"entailment needs one premise per hypothesis, got {len(premises)} and {len(hypotheses)}")


class ScoredEntailment:
    """A judge that scores every pair (it cannot fail per pair): ``entails`` decides."""

    name: str

    def entails(self, premises: list[str], hypotheses: list[str]) -> list[tuple[bool, float]]:
        raise NotImplementedError

    def judge(self, premises: list[str], hypotheses: list[str], keys: list[str]) -> list[Support]:
        return [Support("entail" if ok else "reject", float(score)) for ok, score in self.entails(premises, hypotheses)]


class LexicalEntailment(ScoredEntailment):
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


class NliEntailment(ScoredEntailment):
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


def _support(label: Label) -> Support:
    if not label.ok:
        return Support("error", None, {"error": label.error, "raw": label.raw})
    how = "logprobs" if label.score is not None else "text"
    return Support("entail" if label.label == "yes" else "reject", label.score, {"raw": label.raw, "decided_by": how})


def _yes_no(response: Any) -> tuple[str, float] | None:
    return first_token_label(response, YES_NO)


def text_support_request(key: str, premise: str, hypothesis: str) -> ChatRequest:
    """Does a document (cut to ``DOC_CHARS``) support a statement? A yes/no label request."""
    return label_request(
        key,
        TEXT_SYSTEM,
        f"Document: {premise[:DOC_CHARS]}\n\nStatement: {hypothesis}\n"
        "Does the document support the statement? Reply with exactly one word: yes or no.",
        TEXT_TEMPLATE,
    )


def image_support_request(key: str, sha: str, hypothesis: str) -> ChatRequest:
    """Does an image support a statement? A yes/no label request for a vision model."""
    return label_request(
        key,
        IMAGE_SYSTEM,
        [
            {"type": "image", "sha256": sha},
            {
                "type": "text",
                "text": f"Statement: {hypothesis}\n"
                "Does the image support the statement? Reply with exactly one word: yes or no.",
            },
        ],
        IMAGE_TEMPLATE,
    )


class LLMEntailment:
    """A chat model asked, per (premise, hypothesis), whether the document supports the statement."""

    def __init__(self, pool: ModelPool, model: str, stage: str = "citation") -> None:
        self.pool = pool
        self.model = model
        self.stage = stage
        self.name = f"llm:{model}"

    def judge(self, premises: list[str], hypotheses: list[str], keys: list[str]) -> list[Support]:
        _check_pairs(premises, hypotheses)
        requests = [
            text_support_request(key, premise, hypothesis)
            for key, premise, hypothesis in zip(keys, premises, hypotheses)
        ]
        labels = ask_labels(self.pool.client(self.model), requests, YES_NO, REMINDER, self.stage, _yes_no)
        return [_support(label) for label in labels]

    def close(self) -> None:
        self.pool.release(self.model)


def entailment_judge(spec: EntailmentSpec | str | EntailmentJudge, pool: ModelPool | None = None) -> EntailmentJudge:
    """The judge a spec names; a judge object is used as is."""
    if not isinstance(spec, (str, Lexical, NLI, LLM)):
        if not isinstance(spec, EntailmentJudge):
            raise MmcurateError("a text entailment judge needs name and judge()")
        return spec
    judge: EntailmentSpec = coerce(EntailmentSpec, spec)
    if isinstance(judge, Lexical):
        return LexicalEntailment(LEXICAL_THRESHOLD if judge.threshold is None else judge.threshold)
    if isinstance(judge, NLI):
        return NliEntailment(judge.path.expanduser())
    if pool is None:
        raise MmcurateError(f"text entailment {judge} needs a model pool")
    return LLMEntailment(pool, judge.model)


def image_support(
    pool: ModelPool, model: str, shas: list[str], hypotheses: list[str], keys: list[str], stage: str = "citation"
) -> list[Support]:
    """A vision model's yes/no on whether each image shows what its statement says."""
    requests = [image_support_request(key, sha, hypothesis) for key, sha, hypothesis in zip(keys, shas, hypotheses)]
    labels = ask_labels(pool.client(model), requests, YES_NO, REMINDER, stage, _yes_no)
    return [_support(label) for label in labels]
