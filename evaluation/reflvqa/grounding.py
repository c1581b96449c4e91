"""Section 6.2's image grounding methods on ImageRAG (seed 004, Table 7: N = 1, K = 5, GPT-4o:
ImageRAG, + CoT, + Self-Refine, + Captioning), each a setting of the grid over ImageRAG's
documents:

- ``image-cot`` (zero-shot CoT, appendix C.1): the answer prompt with "First, think carefully
  step by step about what documents are needed ... between <thinking> and </thinking> tags";
  the reply must hold one thinking block, first, and the cited answer after it (read strictly;
  the thinking is kept as a step).
- ``image-self-refine`` (Self-Refine, appendix C.1 and Table 18): the ImageRAG answer, then the
  self-feedback prompt appended to the chat; the model scores its answer on three traits (0-3
  each) and writes the combined score between <total score> tags. "The response is finalized
  when the combined score reaches 6 or when three iterations have been completed"
  (``self_refine_stop``, ``self_refine_rounds``): below the stop score the feedback stays in the
  chat and the model writes an improved answer, which the next round scores. Every answer,
  feedback and score is kept as a step. A round whose feedback or improved answer stays
  unreadable or fails (one retry) ends the refinement: the answer is the last readable one
  (a failed round does not void an answer that was already valid), and the step keeps the
  round's error, counted in the table (``self_refine_rounds_failed``).
- ``image-caption`` (error-robust captioning, Table 16): each image document followed by its
  caption (the configured captioner's, written for the question with the error-robust
  prompt; without one the caption its source gives it, a stand-in the notes name), as
  Two-step's image branch shows them.

Every reply is read strictly with one retry, then a counted error naming the step.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from mmcurate.models.labels import ask_parsed
from mmcurate.models.requests import ChatRequest
from mmcurate.retrieval.rag import Hit

from .answers import (
    ANSWERED,
    FAILED,
    Answer,
    Answering,
    answer_once,
    answer_request,
    ask_cited,
    ask_per_count,
    captions_of,
    cited_ids,
    failure_of,
    shown,
)
from .cited_answers import CitedSentence, parse_cited_answer
from .prompts import (
    COT_REMINDER,
    COT_TEMPLATE,
    FEEDBACK_PROMPT,
    FEEDBACK_REMINDER,
    FEEDBACK_TEMPLATE,
    REFINE_PROMPT,
    REFINE_TEMPLATE,
    answer_reminder,
    cot_messages,
)

_THINKING = re.compile(r"^\s*<thinking>(.*?)</thinking>(.*)$", re.DOTALL | re.IGNORECASE)
_TOTAL = re.compile(r"<total score>\s*(\d+)\s*</total score>", re.IGNORECASE)
MAX_SCORE = 9  # three traits of 0 to 3 (Table 18)


def read_cot(text: str, shown_count: int) -> tuple[str, list[CitedSentence]] | None:
    """(thinking, cited sentences) of a reply that opens with one thinking block and answers
    after it; None otherwise."""
    match = _THINKING.match(text or "")
    if match is None or "<thinking>" in match.group(2).lower() or not match.group(1).strip():
        return None
    sentences = parse_cited_answer(match.group(2), shown_count)
    return None if sentences is None else (match.group(1).strip(), sentences)


def read_total_score(text: str) -> int | None:
    """The combined score of a self-feedback reply: one ``<total score>N</total score>``, N in 0-9."""
    found = _TOTAL.findall(text or "")
    if len(found) != 1 or not 0 <= int(found[0]) <= MAX_SCORE:
        return None
    return int(found[0])


def cot_request(row: Mapping[str, Any], documents: Sequence[Mapping[str, Any]], max_tokens: int) -> ChatRequest:
    return ChatRequest(
        key=row["sample_id"],
        template=COT_TEMPLATE,
        max_tokens=max_tokens,
        messages=cot_messages(row["question"], row["images"], documents),
    )


def feedback_request(row: Mapping[str, Any], history: Sequence[dict], round_: int, max_tokens: int) -> ChatRequest:
    """Round ``round_``'s self-feedback: the chat so far (ending with the answer) and Table 18's prompt."""
    return ChatRequest(
        key=f"{row['sample_id']}/feedback{round_}",
        template=FEEDBACK_TEMPLATE,
        max_tokens=max_tokens,
        messages=[*history, {"role": "user", "content": FEEDBACK_PROMPT}],
    )


def refine_request(row: Mapping[str, Any], history: Sequence[dict], round_: int, max_tokens: int) -> ChatRequest:
    """Round ``round_``'s improved answer: the chat so far (ending with the feedback) and the ask."""
    return ChatRequest(
        key=f"{row['sample_id']}/refine{round_}",
        template=REFINE_TEMPLATE,
        max_tokens=max_tokens,
        messages=[*history, {"role": "user", "content": REFINE_PROMPT}],
    )


def answer_cot(answering: Answering, rows: Sequence[Mapping[str, Any]], hits: Sequence[list[Hit]]) -> list[Answer]:
    """ImageRAG + CoT: think first, then the cited answer (see the module docstring)."""
    requests = [cot_request(row, shown(answering, h), answering.max_tokens) for row, h in zip(rows, hits)]
    labels = ask_per_count(
        answering,
        requests,
        [len(h) for h in hits],
        read_cot,
        lambda _: COT_REMINDER,
        answering.stage,
        lambda n: f"a <thinking> block, then an answer citing documents 1-{n}",
    )
    out = []
    for h, label in zip(hits, labels):
        if label.ok:
            thinking, sentences = label.label
            out.append(
                Answer(
                    h,
                    cited_ids(sentences, h),
                    label.raw[-1],
                    ANSWERED,
                    steps=[{"step": "thinking", "answer": thinking, "error": None}],
                )
            )
        else:
            out.append(Answer(h, None, label.raw[-1], *failure_of(label, "answer")))
    return out


def answer_self_refine(
    answering: Answering, rows: Sequence[Mapping[str, Any]], hits: Sequence[list[Hit]], rounds: int = 3, stop: int = 6
) -> list[Answer]:
    """ImageRAG + Self-Refine: feedback and refinement until the combined score reaches
    ``stop`` or ``rounds`` feedbacks were given (see the module docstring)."""
    out = answer_once(answering, rows, hits)  # the ImageRAG answer: the same request, a cache hit after ImageRAG
    history: dict[int, list[dict]] = {}
    for i, answer in enumerate(out):
        answer.steps = [{"step": "answer 0", "answer": answer.reply, "error": answer.error}]
        if answer.status == ANSWERED:
            request = answer_request(rows[i], shown(answering, hits[i]), answering.max_tokens)
            history[i] = [*request.messages, {"role": "assistant", "content": answer.reply}]
    active = sorted(history)
    for round_ in range(1, rounds + 1):
        feedback = (
            ask_parsed(
                answering.pool.client(answering.model),
                [feedback_request(rows[i], history[i], round_, answering.max_tokens) for i in active],
                read_total_score,
                FEEDBACK_REMINDER,
                f"{answering.stage}.feedback",
                f"a combined score of 0-{MAX_SCORE} between <total score> tags",
            )
            if active
            else []
        )
        refine = []
        for i, label in zip(active, feedback):
            out[i].steps.append({"step": f"feedback {round_}", "answer": label.raw[-1], "error": label.error})
            if label.ok and label.label < stop:
                history[i] += [
                    {"role": "user", "content": FEEDBACK_PROMPT},
                    {"role": "assistant", "content": label.raw[-1]},
                ]
                refine.append(i)
        refined = ask_per_count(
            answering,
            [refine_request(rows[i], history[i], round_, answering.max_tokens) for i in refine],
            [len(hits[i]) for i in refine],
            parse_cited_answer,
            answer_reminder,
            f"{answering.stage}.refine",
            lambda n: f"an improved answer citing documents 1-{n}",
        )
        for i, label in zip(refine, refined):
            out[i].steps.append({"step": f"answer {round_}", "answer": label.raw[-1], "error": label.error})
            if label.ok:
                out[i].reply, out[i].sentences = label.raw[-1], cited_ids(label.label, hits[i])
                history[i] += [
                    {"role": "user", "content": REFINE_PROMPT},
                    {"role": "assistant", "content": label.raw[-1]},
                ]
        active = [i for i, label in zip(refine, refined) if label.ok]
    return out


def answer_captioned(
    answering: Answering, rows: Sequence[Mapping[str, Any]], hits: Sequence[list[Hit]]
) -> list[Answer]:
    """ImageRAG + Captioning: each image document followed by its caption (see the module docstring)."""
    captions = captions_of(answering, rows, hits)
    asks = [i for i, (_, error) in enumerate(captions) if error is None]
    labels = dict(
        zip(
            asks,
            ask_cited(answering, [(rows[i], shown(answering, hits[i], captions[i][0])) for i in asks], answering.stage),
        )
    )
    out = []
    for i, h in enumerate(hits):
        answer = Answer(h, None, None, ANSWERED, None, captions[i][0])
        label = labels.get(i)
        if label is None:
            answer.status, answer.error = FAILED, captions[i][1]
        elif label.ok:
            answer.reply, answer.sentences = label.raw[-1], cited_ids(label.label, h)
        else:
            answer.reply = label.raw[-1]
            answer.status, answer.error = failure_of(label, "answer")
        out.append(answer)
    return out
