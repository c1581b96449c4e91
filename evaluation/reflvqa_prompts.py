"""The prompts of a RefLVQA evaluation: the system's referential answer and the three
evaluators (groundedness, completeness, relevance), in the spirit of the seed paper's
appendix (Tables 11-13 and 15), in our own words.

Each template id enters the response-cache key: change a wording, bump its suffix. The
evaluators reply with one closed-set label, read strictly (``models.labels``): the paper
asks its evaluator for an explanation before an "Answer:" line, which a strict reader
cannot take without guessing where the label is, so ours ask for the label alone.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mmcurate.gating.prompts import evidence_parts

ANSWER_TEMPLATE = "reflvqa.eval.answer.v1"
ANSWER_SYSTEM = (
    "You answer a question about an image with the help of numbered documents retrieved for "
    "it. Write a helpful answer of a few sentences that stays faithful to the documents. End "
    "every sentence with the number of the document that supports it in square brackets, "
    "like [1], or several numbers, like [2, 3]. Leave out any sentence that no document "
    "supports."
)


def answer_reminder(shown: int) -> str:
    return (f"Your answer could not be read. Cite documents only by their numbers, 1 to {shown}, in square "
            "brackets at the end of each sentence, like [1] or [1, 2]. Write the whole answer again.")


def answer_messages(question: str, images: Sequence[str], documents: Sequence[Mapping[str, Any]]) -> list[dict]:
    """System prompt, then the numbered documents, the question's images and the question."""
    parts = [*evidence_parts(documents)]
    parts += [{"type": "image", "sha256": sha} for sha in images]
    parts.append({"type": "text", "text": f"Question: {question.strip()}\nAnswer:"})
    return [{"role": "system", "content": ANSWER_SYSTEM}, {"role": "user", "content": parts}]


# ---------------------------------------------------------------------------- evaluators
GROUNDEDNESS_TEMPLATE = "reflvqa.eval.groundedness.v1"
GROUNDEDNESS_SYSTEM = (
    "You check how well documents support a statement. First find the separate claims the "
    "statement makes, then check each claim against the documents. If the documents back "
    "every claim, reply: fully supported. If they back some claims but not all, reply: "
    "partially supported. If they back none, reply: not supported. Reply with exactly one "
    "of: fully supported, partially supported, not supported."
)
GROUNDEDNESS_LABELS = {
    "fully supported": "1", "fully support": "1", "fully": "1",
    "partially supported": "0.5", "partially support": "0.5", "partially": "0.5",
    "not supported": "0", "not support": "0", "unsupported": "0",
}
GROUNDEDNESS_REMINDER = ("Your reply could not be read. Reply with exactly one of: fully supported, "
                         "partially supported, not supported.")

COMPLETENESS_TEMPLATE = "reflvqa.eval.completeness.v1"
COMPLETENESS_SYSTEM = (
    "You check whether a response covers a statement. First find the separate claims the "
    "statement makes, then check how the response addresses each one. If the response "
    "addresses every claim directly and clearly, reply: fully complete. If it addresses only "
    "some claims, or only mentions or implies them, reply: partially complete. If it "
    "addresses none of them, reply: not complete. Reply with exactly one of: fully complete, "
    "partially complete, not complete."
)
COMPLETENESS_LABELS = {
    "fully complete": "1", "fully": "1", "complete": "1",
    "partially complete": "0.5", "partially": "0.5",
    "not complete": "0", "incomplete": "0",
}
COMPLETENESS_REMINDER = ("Your reply could not be read. Reply with exactly one of: fully complete, "
                         "partially complete, not complete.")

RELEVANCE_TEMPLATE = "reflvqa.eval.relevance.v1"
RELEVANCE_SYSTEM = (
    "You rate how relevant an answer is to a question, from 1 to 7. Read the question, then "
    "judge how closely each sentence of the answer serves it. 7: the answer addresses the "
    "question fully and says nothing unnecessary. 4: it covers part of the question with "
    "noticeable unnecessary or off-topic content. 1: it gives nothing relevant. Every "
    "sentence that drifts from the question lowers the rating. Reply with a single digit "
    "from 1 to 7."
)
RELEVANCE_LABELS = {str(n): str(n) for n in range(1, 8)}
RELEVANCE_REMINDER = "Your reply could not be read. Reply with a single digit from 1 to 7."


def groundedness_prompt(statement: str, documents: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The statement with its cited documents (image documents as image parts)."""
    parts = [*evidence_parts(documents)]
    parts.append({"type": "text", "text": f"Statement: {statement}\nHow well do the documents support the "
                                          "statement? Reply with: fully supported, partially supported or not supported."})
    return parts


def completeness_prompt(statement: str, response: str) -> str:
    return (f"Response: {response}\n\nStatement: {statement}\n"
            "How completely does the response cover the statement? Reply with: fully complete, "
            "partially complete or not complete.")


def relevance_prompt(question: str, answer: str) -> str:
    return f"Question: {question}\n\nAnswer: {answer}\n\nRelevance (1-7):"
