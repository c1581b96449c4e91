"""The prompts of a RefLVQA evaluation: the system's search queries, its referential answer,
Two-step's image captions and combined answer, section 6.2's image grounding methods (CoT,
Self-Refine's feedback and refinement), and the three evaluators (groundedness,
completeness, relevance), in the spirit of the seed paper's appendix (Tables 11-18), in our
own words.

Each template id enters the response-cache key: change a wording, bump its suffix. The
groundedness and completeness evaluators answer as the paper's Tables 11 and 12 ask: a brief
explanation first, then a last line beginning with "Answer: " and one closed-set label, read
strictly (``reasoned_label``: the label line must be the reply's last line and the only one,
the explanation before it must say something; one retry, then an error). The relevance
evaluator gives the rating alone, as Table 13's form asks ("scores ONLY").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from mmcurate.gating.prompts import evidence_parts
from mmcurate.models.labels import strict_label

ANSWER_TEMPLATE = "reflvqa.eval.answer.v1"
ANSWER_SYSTEM = (
    "You answer a question about an image with the help of numbered documents retrieved for "
    "it. Write a helpful answer of a few sentences that stays faithful to the documents. End "
    "every sentence with the number of the document that supports it in square brackets, "
    "like [1], or several numbers, like [2, 3]. Leave out any sentence that no document "
    "supports."
)


def answer_reminder(shown: int) -> str:
    return (
        f"Your answer could not be read. Cite documents only by their numbers, 1 to {shown}, in square "
        "brackets at the end of each sentence, like [1] or [1, 2]. Write the whole answer again."
    )


NO_CAPTION = "Caption: none; neither a captioning model nor the image's source gives one."


def document_parts(documents: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The numbered documents (``evidence_parts``); an image document that carries a
    ``caption`` key (Two-step) is shown bare and followed by its caption, or by a line saying
    it has none (the paper puts the caption right after the image document)."""
    bare = [{**d, "title": None, "text": None} if "caption" in d else d for d in documents]
    images = iter([d for d in documents if d.get("modality") == "image"])
    parts = []
    for part in evidence_parts(bare):
        parts.append(part)
        if part["type"] == "image":
            doc = next(images)
            if "caption" in doc:
                parts.append({"type": "text", "text": f"Caption: {doc['caption']}" if doc["caption"] else NO_CAPTION})
    return parts


def answer_messages(question: str, images: Sequence[str], documents: Sequence[Mapping[str, Any]]) -> list[dict]:
    """System prompt, then the numbered documents, the question's images and the question."""
    parts = document_parts(documents)
    parts += [{"type": "image", "sha256": sha} for sha in images]
    parts.append({"type": "text", "text": f"Question: {question.strip()}\nAnswer:"})
    return [{"role": "system", "content": ANSWER_SYSTEM}, {"role": "user", "content": parts}]


# -------------------------------------------------------------------------- search queries
QUERIES_TEMPLATE = "reflvqa.eval.queries.v1"
QUERIES_SYSTEM = (
    "You write web search queries. Given a question about an image, write search queries that "
    "would find documents holding the information needed to answer it well."
)


def _how_many(n: int) -> str:
    return (
        "Write exactly one search query on a single line, with nothing before or after it."
        if n == 1
        else f"Write exactly {n} different search queries, one per line, with nothing before or after them."
    )


def queries_messages(question: str, images: Sequence[str], n: int) -> list[dict]:
    """System prompt, then the question's images, how many queries, and the question."""
    parts: list[dict] = [{"type": "image", "sha256": sha} for sha in images]
    parts.append(
        {
            "type": "text",
            "text": f"{_how_many(n)}\nQuestion: {question.strip()}\nSearch {'query' if n == 1 else 'queries'}:",
        }
    )
    return [{"role": "system", "content": QUERIES_SYSTEM}, {"role": "user", "content": parts}]


def queries_reminder(n: int) -> str:
    return f"Your reply could not be read. {_how_many(n)}"


# -------------------------------------------------------------------------------- Two-step
CAPTION_TEMPLATE = "reflvqa.eval.caption.v1"
CAPTION_SYSTEM = (
    "You describe an image for someone who will answer a question from it. State the facts the "
    "image shows that you can read or see with confidence: text, numbers, objects, labels. Write "
    "plain sentences, not a list. Describe nothing the image does not clearly show, leave out "
    "nothing it does show, draw no general conclusion from a detail, and say little about style "
    "or beauty."
)


def caption_messages(question: str, image: str) -> list[dict]:
    """The image document, then the question it is described for (the paper's captioning
    prompt carries the question)."""
    return [
        {"role": "system", "content": CAPTION_SYSTEM},
        {
            "role": "user",
            "content": [
                {"type": "image", "sha256": image},
                {"type": "text", "text": f"Question: {question.strip()}\nDescription:"},
            ],
        },
    ]


MERGE_TEMPLATE = "reflvqa.eval.merge.v1"
MERGE_SYSTEM = (
    "You combine two answers to one question into a single answer: the first was written from "
    "text documents, the second from image documents, and both cite their documents by number "
    "in square brackets. Where the two say the same thing, say it once and keep the numbers of "
    "both, like [1, 4]. Keep every other sentence with its numbers. Use only what the two "
    "answers say, and no number they do not cite. Write clearly and without repetition."
)
MERGE_REMINDER = (
    "Your combined answer could not be read. End each sentence with the numbers the two answers "
    "cite for it, in square brackets, like [1] or [1, 4], and cite no other number. Write the whole "
    "answer again."
)


def merge_messages(question: str, from_text: str, from_images: str) -> list[dict]:
    user = (
        f"Question: {question.strip()}\n\nAnswer from the text documents: {from_text}\n\n"
        f"Answer from the image documents: {from_images}\n\nCombined answer:"
    )
    return [{"role": "system", "content": MERGE_SYSTEM}, {"role": "user", "content": user}]


# ---------------------------------------------------------------------------- evaluators
GROUNDEDNESS_TEMPLATE = "reflvqa.eval.groundedness.v2"
GROUNDEDNESS_SYSTEM = (
    "You check how well documents support a statement. First find the separate claims in the "
    "statement that need checking, then check each claim against the documents. If the "
    "documents back every claim, the label is: fully supported. If they back some claims but "
    "not all, the label is: partially supported. If they back none, the label is: not "
    "supported. Explain your choice briefly first; then end with one last line that begins "
    'with "Answer: " followed by exactly one of: fully supported, partially supported, not supported.'
)
GROUNDEDNESS_LABELS = {
    "fully supported": "1",
    "fully support": "1",
    "fully": "1",
    "partially supported": "0.5",
    "partially support": "0.5",
    "partially": "0.5",
    "not supported": "0",
    "not support": "0",
    "unsupported": "0",
}
GROUNDEDNESS_REMINDER = (
    "Your reply could not be read. Explain briefly, then end with one last line that "
    'begins with "Answer: " followed by exactly one of: fully supported, partially '
    "supported, not supported."
)

COMPLETENESS_TEMPLATE = "reflvqa.eval.completeness.v2"
COMPLETENESS_SYSTEM = (
    "You check whether a response covers a statement. First find the separate claims in the "
    "statement that need checking, then check how the response addresses each one. If the "
    "response addresses every claim directly and clearly, the label is: fully complete. If it "
    "addresses only some claims, or only mentions or implies them, the label is: partially "
    "complete. If it addresses none of them, the label is: not complete. Explain your choice "
    'briefly first; then end with one last line that begins with "Answer: " followed by '
    "exactly one of: fully complete, partially complete, not complete."
)
COMPLETENESS_LABELS = {
    "fully complete": "1",
    "fully": "1",
    "complete": "1",
    "partially complete": "0.5",
    "partially": "0.5",
    "not complete": "0",
    "incomplete": "0",
}
COMPLETENESS_REMINDER = (
    "Your reply could not be read. Explain briefly, then end with one last line that "
    'begins with "Answer: " followed by exactly one of: fully complete, partially '
    "complete, not complete."
)

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
    parts.append(
        {
            "type": "text",
            "text": f"Statement: {statement}\nHow well do the documents support the "
            'statement? Explain briefly, then give the last line as "Answer: " '
            "and one of: fully supported, partially supported, not supported.",
        }
    )
    return parts


def completeness_prompt(statement: str, response: str) -> str:
    return (
        f"Response: {response}\n\nStatement: {statement}\n"
        "How completely does the response cover the statement? Explain briefly, then give the last line "
        'as "Answer: " and one of: fully complete, partially complete, not complete.'
    )


_ANSWER_LINE = re.compile(r"^[\s*_#>`-]*answer[\s*_`]*:(.*)$", re.IGNORECASE)


def reasoned_label(text: str | None, labels: Mapping[str, str]) -> tuple[str, str] | None:
    """(label, explanation) of a reply whose last line is ``Answer: <label>`` (markdown
    emphasis tolerated) after an explanation; None when the label line is missing, not last,
    repeated, holds anything but one label, or nothing explains it."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    found = [i for i, line in enumerate(lines) if _ANSWER_LINE.match(line)]
    if found != [len(lines) - 1]:
        return None
    match = _ANSWER_LINE.match(lines[-1])
    assert match is not None
    label = strict_label(match.group(1), labels)
    reasoning = "\n".join(lines[:-1]).strip()
    if label is None or not any(c.isalnum() for c in reasoning):
        return None
    return label, reasoning


def relevance_prompt(question: str, answer: str) -> str:
    return f"Question: {question}\n\nAnswer: {answer}\n\nRelevance (1-7):"


# --------------------------------------------------- image grounding (004 section 6.2, Table 7)
COT_TEMPLATE = "reflvqa.eval.answer-cot.v1"
COT_INSTRUCTION = (  # added after the answer instruction (004 appendix C.1, zero-shot CoT)
    "First, think carefully step by step about what documents are needed to answer the question. Put your "
    "thinking between <thinking> and </thinking> tags, then write the answer after them."
)
COT_REMINDER = (
    "Your reply could not be read. Put your thinking between <thinking> and </thinking> once, then "
    "write the answer after it, ending every sentence with the numbers of the documents that support "
    "it in square brackets, like [1] or [1, 2]."
)


def cot_messages(question: str, images: Sequence[str], documents: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The answer request with the CoT instruction before the question."""
    messages = answer_messages(question, images, documents)
    messages[1]["content"].insert(len(messages[1]["content"]) - 1, {"type": "text", "text": COT_INSTRUCTION})
    return messages


FEEDBACK_TEMPLATE = "reflvqa.eval.self-feedback.v1"
FEEDBACK_PROMPT = (  # 004 Table 18, appended to the chat after the answer
    "We want to improve your answer step by step. Score it on three traits:\n"
    "1) Evidence existence (0 to 3): does the answer rely only on information present in the image "
    "documents? 0: it uses none of it; 3: it relies only on what the image documents show.\n"
    "2) Evidence utilisation (0 to 3): does the answer find and use the information in the image documents? "
    "0: it misses the key information; 3: it finds and uses the key information well.\n"
    "3) Appropriate generalisation (0 to 3): does the answer generalise only as far as the image documents "
    "allow? 0: it draws unsupported or wrong generalisations; 3: every generalisation rests on the image "
    "documents.\n"
    "Read the documents and your answer again, evaluate each trait, then write the combined score between "
    "<total score> and </total score>."
)
FEEDBACK_REMINDER = (
    "Your feedback could not be read. Evaluate the three traits, then write the combined score "
    "(0 to 9) once, between <total score> and </total score>."
)
REFINE_TEMPLATE = "reflvqa.eval.self-refine.v1"
REFINE_PROMPT = (
    "Using this feedback, write an improved answer to the question. End every sentence with the "
    "numbers of the documents that support it in square brackets, like [1] or [2, 3], and leave out "
    "any sentence that no document supports.\nAnswer:"
)
