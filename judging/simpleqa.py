"""Grading answers with the SimpleQA rubric: pre-judge first, then a lexical rule or a model.

Parsing a judge model's reply is strict (``models.labels``): the reference grader finds a
letter anywhere in the reply, so "CORRECT" reads as C (NOT_ATTEMPTED) there. Here a reply
that is not exactly one grade gets one retry with a reminder, then ``Grade.JUDGE_ERROR``,
which is counted in ``Judge.stats`` and never mapped to a label.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter

from mmcurate.core.config import Settings
from mmcurate.judging.grades import Grade, JudgeItem, Judgement
from mmcurate.judging.prejudge import lexical_grade, prejudged
from mmcurate.models.client import ModelPool
from mmcurate.models.labels import ask_labels, strict_label
from mmcurate.models.requests import ChatRequest

__all__ = ["Grade", "JudgeItem", "Judgement", "Judge", "LexicalJudge", "LLMJudge", "make_judge", "parse_grade"]

TEMPLATE = "judge.simpleqa.v1"
JUDGE_MAX_TOKENS = 10
# accepted spellings of a grade: the letters of the prompt and the grade names
SPELLINGS = {
    "a": "CORRECT",
    "b": "INCORRECT",
    "c": "NOT_ATTEMPTED",
    "correct": "CORRECT",
    "incorrect": "INCORRECT",
    "not_attempted": "NOT_ATTEMPTED",
    "not attempted": "NOT_ATTEMPTED",
}

PROMPT = """Grade one answer to a question against its reference answer(s).

Question: {question}
Reference answer(s): {gold}
Answer to grade: {answer}

Choose one grade:
A) CORRECT: the answer gives the essential information of a reference answer and says nothing \
that contradicts it. Hedging is acceptable when the right answer is still given and no \
conflicting alternative is offered. Minor misspellings of names are acceptable, and details \
the question already makes clear may be left out.
B) INCORRECT: the answer states something that contradicts the reference, whether hedged or \
not, or offers several candidates of which some are wrong.
C) NOT_ATTEMPTED: the essential information is missing but nothing contradicts the reference: \
refusals, "I don't know", requests for more context, answers too vague to check.
Numbers must agree with the reference down to its last significant figure; a different \
number is INCORRECT, a vaguer one (a range or rough estimate where the reference is exact) is \
NOT_ATTEMPTED.

Reply with a single letter: A, B or C."""
REMINDER = "Your reply could not be read as a grade. Reply with exactly one letter and nothing else: A, B or C."


def parse_grade(reply: str) -> Grade | None:
    """The grade a judge reply names, or None when it is not exactly one grade: letters A/B/C
    or the words CORRECT, INCORRECT, NOT_ATTEMPTED, "NOT ATTEMPTED", in any case, with the
    decoration ``models.labels.strict_label`` tolerates (``**A**``, ``"B"``, ``C.``).
    "b)" (a list marker), "The answer is A" and "A or B" are None."""
    label = strict_label(reply, SPELLINGS)
    return None if label is None else Grade(label)


class Judge(ABC):
    """Pre-judge every item, then grade the rest in one batch. ``stats`` counts rules and errors."""

    name: str

    def __init__(self) -> None:
        self.stats: Counter[str] = Counter()

    def grade(self, items: list[JudgeItem], stage: str) -> list[Judgement]:
        settled, rest = prejudged(items)
        results: list[Judgement | None] = [None] * len(items)
        for index, (grade, rule) in settled.items():
            results[index] = Judgement(items[index].key, grade, rule, None)
        for index, judgement in zip(rest, self._grade_rest([items[i] for i in rest], stage)):
            results[index] = judgement
        graded = [judgement for judgement in results if judgement is not None]
        assert len(graded) == len(items)  # every item settled or graded
        for judgement in graded:
            self.stats[f"{judgement.by}:{judgement.grade.value}"] += 1
        return graded

    @abstractmethod
    def _grade_rest(self, items: list[JudgeItem], stage: str) -> list[Judgement]: ...


class LexicalJudge(Judge):
    """The offline judge: token containment (see ``prejudge.lexical_grade``)."""

    name = "lexical-v1"

    def _grade_rest(self, items: list[JudgeItem], stage: str) -> list[Judgement]:
        return [Judgement(i.key, lexical_grade(i), "lexical.containment", None) for i in items]


def judge_messages(item: JudgeItem) -> list[dict]:
    gold = " | ".join(item.gold) if item.gold else "(none given)"
    return [{"role": "user", "content": PROMPT.format(question=item.question, gold=gold, answer=item.answer)}]


def judge_request(item: JudgeItem) -> ChatRequest:
    """What the LLM judge is asked about one answer the pre-judge did not settle."""
    return ChatRequest(item.key, judge_messages(item), TEMPLATE, max_tokens=JUDGE_MAX_TOKENS)


class LLMJudge(Judge):
    def __init__(self, pool: ModelPool, model: str) -> None:
        super().__init__()
        self.pool = pool
        self.model = model
        spec = pool.settings.model(model)
        self.name = f"llm:{spec.model or spec.name}@{spec.revision}"
        self.by = f"llm:{spec.name}"

    def _grade_rest(self, items: list[JudgeItem], stage: str) -> list[Judgement]:
        asks = [judge_request(i) for i in items]
        labels = ask_labels(self.pool.client(self.model), asks, SPELLINGS, REMINDER, stage)
        out = []
        for item, label in zip(items, labels):
            if label.ok:
                out.append(Judgement(item.key, Grade(label.label), self.by, label.raw[-1]))
            else:
                self.stats["judge_error." + ("call_failed" if label.raw[-1] is None else "unparsable")] += 1
                out.append(Judgement(item.key, Grade.JUDGE_ERROR, self.by, label.raw[-1]))
        return out


def make_judge(settings: Settings, pool: ModelPool) -> Judge:
    if settings.judge.kind == "lexical":
        return LexicalJudge()
    assert settings.judge.model is not None  # JudgeSpec validation guarantees it
    return LLMJudge(pool, settings.judge.model)
