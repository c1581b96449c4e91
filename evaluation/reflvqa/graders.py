"""The three RefLVQA answer evaluators: one grade per unit, strictly read or an error.

A unit is what one grade is about (the seed paper, section 4.2):

- groundedness: one sentence of the system's answer with the documents it cites; 1 (fully
  supported), 0.5 (partially) or 0 (not supported). A sentence citing nothing is 0 without
  asking anyone (the caller never makes such a unit);
- completeness: one fact-checkable sentence of the dataset answer with the system's answer;
  1 (fully addressed), 0.5 (partially) or 0 (not addressed);
- relevance: the question with the system's answer; a rating from 1 to 7.

``make_grader(spec, metric)`` gives a ``ModelGrader`` (a chat model of the config, its reply
read strictly, one retry, then a counted error: groundedness and completeness as an
explanation then ``Answer: <label>``, the paper's Tables 11-12, the explanation kept as the
grade's ``reasoning``; relevance a digit alone, Table 13) or the
offline ``LexicalGrader`` stand-in. The stand-in reads no meaning: it measures how many
content words (``core.text.content_tokens``) of the statement (the question, for
relevance) reappear in the documents or the answer. A share at or above the threshold
(default 0.6) is 1, at or above half of it 0.5, else 0; relevance is 1 + 6 x the share of
the question's content words found in the answer, rounded. Image documents carry no words,
so for it an image citation supports nothing. Its name, ``lexical-grader-v1``, goes into
every output so nobody takes its numbers for an evaluator model's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from mmcurate.core.specs import GraderSpec, Lexical, coerce
from mmcurate.core.text import content_tokens
from mmcurate.models.labels import ask_labels, ask_parsed, label_request
from mmcurate.models.requests import ChatRequest

from . import prompts as P

METRICS = ("groundedness", "completeness", "relevance")
SENTENCE_METRICS = ("groundedness", "completeness")  # graded 1 / 0.5 / 0 per sentence
LEXICAL_THRESHOLD = 0.6
DOC_CHARS = 4000  # a document longer than this is cut for a model evaluator
REASONED = ("groundedness", "completeness")  # explain, then "Answer: <label>" (004 Tables 11-12)
REASONED_MAX_TOKENS = 256  # an explanation and the label line
STAGE = "evaluate.reflvqa"
NO_CITATION = "rule:no-citation"  # the grader of a sentence that cites nothing (0, no call)
INVALID_CITATION = "rule:invalid-citation"  # ... whose citations all name no shown document (0, no call)
BY_RULE = (NO_CITATION, INVALID_CITATION)


@dataclass(frozen=True)
class Unit:
    key: str  # unique in one grading batch, e.g. f"{sample_id}/g0"
    metric: str
    statement: str  # groundedness: answer sentence; completeness: dataset sentence; relevance: question
    response: str = ""  # completeness and relevance: the system's answer
    documents: tuple[Mapping[str, Any], ...] = field(default=())  # groundedness: cited documents


@dataclass(frozen=True)
class UnitGrade:
    value: float | None  # 1 / 0.5 / 0, or 1..7 for relevance; None: error
    by: str
    raw: str | None = None
    error: str | None = None
    reasoning: str | None = None  # the evaluator's explanation before its label (groundedness, completeness)


@runtime_checkable
class Grader(Protocol):
    name: str

    def grade(self, units: list[Unit]) -> list[UnitGrade]: ...


def _share(wanted: set[str], found: set[str]) -> float:
    return len(wanted & found) / len(wanted) if wanted else 0.0


class LexicalGrader:
    """Token-overlap stand-in for an evaluator model (see the module docstring)."""

    def __init__(self, metric: str, threshold: float | None = None) -> None:
        self.metric = metric
        self.threshold = LEXICAL_THRESHOLD if threshold is None else threshold
        self.name = "lexical-grader-v1" + ("" if self.threshold == LEXICAL_THRESHOLD else f"@{self.threshold:g}")

    def _level(self, share: float) -> float:
        return 1.0 if share >= self.threshold else 0.5 if share >= self.threshold / 2 else 0.0

    def grade(self, units: list[Unit]) -> list[UnitGrade]:
        out = []
        for unit in units:
            if unit.metric == "groundedness":
                text = " ".join((d.get("title") or "") + " " + (d.get("text") or "") for d in unit.documents)
                value = self._level(_share(content_tokens(unit.statement), content_tokens(text)))
            elif unit.metric == "completeness":
                value = self._level(_share(content_tokens(unit.statement), content_tokens(unit.response)))
            else:
                value = float(1 + int(6 * _share(content_tokens(unit.statement), content_tokens(unit.response)) + 0.5))
            out.append(UnitGrade(value, self.name))
        return out


_ASK = {
    "groundedness": (P.GROUNDEDNESS_TEMPLATE, P.GROUNDEDNESS_SYSTEM, P.GROUNDEDNESS_LABELS, P.GROUNDEDNESS_REMINDER),
    "completeness": (P.COMPLETENESS_TEMPLATE, P.COMPLETENESS_SYSTEM, P.COMPLETENESS_LABELS, P.COMPLETENESS_REMINDER),
    "relevance": (P.RELEVANCE_TEMPLATE, P.RELEVANCE_SYSTEM, P.RELEVANCE_LABELS, P.RELEVANCE_REMINDER),
}


def _cut(documents: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{**d, "text": (d.get("text") or "")[:DOC_CHARS] or None} for d in documents]


def grade_request(unit: Unit) -> ChatRequest:
    """The request that asks a model evaluator for ``unit``'s grade."""
    template, system, _, _ = _ASK[unit.metric]
    if unit.metric == "groundedness":
        user: str | list[dict] = P.groundedness_prompt(unit.statement, _cut(unit.documents))
    elif unit.metric == "completeness":
        user = P.completeness_prompt(unit.statement, unit.response)
    else:
        user = P.relevance_prompt(unit.statement, unit.response)
    request = label_request(unit.key, system, user, template, logprobs=False)
    return replace(request, max_tokens=REASONED_MAX_TOKENS) if unit.metric in REASONED else request


class ModelGrader:
    """A chat model of the config grading one metric, its reply read strictly; its calls are
    counted under ``evaluate.reflvqa.<metric>``."""

    def __init__(self, pool: Any, model: str, metric: str) -> None:
        self.pool = pool  # models.client.ModelPool
        self.model = model
        self.metric = metric
        self.stage = f"{STAGE}.{metric}"
        self.name = f"llm:{model}"

    def grade(self, units: list[Unit]) -> list[UnitGrade]:
        _, _, labels, reminder = _ASK[self.metric]
        requests = [grade_request(u) for u in units]
        try:
            if self.metric in REASONED:
                names = "/".join(dict.fromkeys(labels.values()))
                replies = ask_parsed(
                    self.pool.client(self.model),
                    requests,
                    lambda t: P.reasoned_label(t, labels),
                    reminder,
                    self.stage,
                    f"an explanation, then 'Answer: ' and one of {names}",
                )
                return [
                    UnitGrade(float(r.label[0]), self.name, r.raw[-1], None, r.label[1])
                    if r.ok
                    else UnitGrade(None, self.name, r.raw[-1], r.error)
                    for r in replies
                ]
            replies = ask_labels(self.pool.client(self.model), requests, labels, reminder, self.stage)
        finally:
            self.pool.release(self.model)
        return [UnitGrade(float(r.label) if r.ok else None, self.name, r.raw[-1], r.error) for r in replies]


def make_grader(spec: GraderSpec | str, metric: str, pool: Any = None) -> Grader:
    """The evaluator a spec names for ``metric``: ``lexical[:<threshold>]`` or a model name."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; known: {', '.join(METRICS)}")
    grader: GraderSpec = coerce(GraderSpec, spec)
    if isinstance(grader, Lexical):
        return LexicalGrader(metric, grader.threshold)
    return ModelGrader(pool, grader.name, metric)
