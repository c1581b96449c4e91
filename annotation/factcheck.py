"""RefLVQA stage 3 (seed paper 3.3): split answers into sentences, mark the fact-checkable ones.

Each sample's answer (``answers[0]``: a Reddit sample has exactly one) is split with
``annotation.sentences.split_sentences``. An LLM labels every sentence ``yes`` (it asserts
at least one claim that could be checked against a reliable source) or ``no``; the answer
is parsed strictly, with one retry, as in every RefLVQA LLM check.

The output table is the input plus a column ``sentences``:
``list<struct{index int32, text string, fact_checkable bool}>``. A sentence whose label
failed (call failed or unparsable after the retry) gets ``fact_checkable`` null and a
ledger verdict ``error``; its sample is held out of ``kept`` (verdict ``drop``, reason
``undetermined``) rather than released with a guessed label. A rerun asks again only for
the failures (the response cache stores successes only). A sample whose answer has no
sentence is dropped too.
"""
from __future__ import annotations

import re
from typing import Any

import pyarrow as pa

from mmcurate.core.errors import MmcurateError
from mmcurate.core.ledger import Decision
from mmcurate.core.stages import StageResult

from .necessity import LABEL_LOGPROBS, LABEL_MAX_TOKENS, Label, ask_labels, first_token_label

STAGE = "factcheck"
CHECK_SENTENCE = "factcheck.sentence.v1"
CHECK_SAMPLE = "factcheck.sample.v1"
TEMPLATE = "reflvqa.factcheck.v1"
SYSTEM = (
    "You decide whether a sentence is fact-checkable. A sentence is fact-checkable when it "
    "asserts at least one claim about the world that could be checked against a reliable "
    "source: a name, an identification, a date, a number, a place, an event, a property or "
    "a cause of something. Opinions, advice, jokes, questions, greetings, personal feelings "
    "and personal experiences that nobody else could check are not fact-checkable. Reply "
    "with exactly one word: yes or no."
)
REMINDER = "Your reply could not be read. Reply with exactly one word: yes or no."

SENTENCE = pa.struct(
    [
        pa.field("index", pa.int32(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("fact_checkable", pa.bool_()),  # null: the label failed
    ]
)


def factcheck_messages(question: str, sentence: str) -> list[dict]:
    return [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": (
                f"The sentence comes from an answer to this question: {question}\n"
                f"Sentence: {sentence}\n"
                "Is the sentence fact-checkable? Reply with exactly one word: yes or no."
            ),
        },
    ]


HEURISTIC = "heuristic"
_NAME_OR_NUMBER = re.compile(r"\d|(?<!^)(?<![.!?]\s)\b[A-Z][a-z]+")
_FIRST_PERSON = re.compile(r"\b(I|I'm|I've|my|me|we|our)\b")


def heuristic_label(sentence: str) -> Label:
    """The offline stand-in for an LLM labeller: a declarative sentence of at least six
    words that names something (a capitalised word after the first) or gives a number,
    and is not about the writer, asserts a checkable claim. Tiny local chat models answer
    yes/no at chance; this rule is deterministic and the manifest names it."""
    text = sentence.strip()
    checkable = (
        len(text.split()) >= 6
        and not text.endswith("?")
        and _NAME_OR_NUMBER.search(text) is not None
        and _FIRST_PERSON.search(text) is None
    )
    return Label("yes" if checkable else "no", [None], None)


def fact_checkable(
    samples: pa.Table,
    pool: Any,
    model: str | None,
    run_id: str | None = None,
    splitter: Any = None,
) -> StageResult:
    """Annotate every answer sentence as fact-checkable or not with ``model``.

    ``splitter`` (text -> list of sentences) defaults to ``split_sentences``. ``model``
    ``"heuristic"`` labels with ``heuristic_label`` instead of a model.
    """
    if not model:
        raise MmcurateError("the fact-checkable stage needs a model (reflvqa.factcheck_model)")
    if splitter is None:
        from .sentences import split_sentences as splitter
    from mmcurate.gating.requests import ChatRequest

    rows = samples.to_pylist()
    split = [[s for s in splitter(r["answers"][0] if r["answers"] else "") if s.strip()] for r in rows]
    if model == HEURISTIC:
        labels = [heuristic_label(s) for sentences in split for s in sentences]
    else:
        requests = [
            ChatRequest(key=f"{r['sample_id']}/s{i}", messages=factcheck_messages(r["question"], s),
                        template=TEMPLATE, max_tokens=LABEL_MAX_TOKENS, logprobs=LABEL_LOGPROBS)
            for r, sentences in zip(rows, split)
            for i, s in enumerate(sentences)
        ]
        try:
            labels = ask_labels(pool.client(model), requests, ("yes", "no"), REMINDER, STAGE,
                                lambda response: first_token_label(response, ("yes", "no"))) if requests else []
        finally:
            pool.release(model)

    decisions: list[Decision] = []
    column: list[list[dict]] = []
    keep_mask: list[bool] = []
    counts = {"input": len(rows), "kept": 0, "dropped": 0, "sentences": 0, "fact_checkable": 0, "errors": 0}
    cursor = 0
    for row, sentences in zip(rows, split):
        sid = row["sample_id"]
        entries = []
        for i, text in enumerate(sentences):
            label = labels[cursor]
            cursor += 1
            value = None if not label.ok else label.label == "yes"
            detail: dict[str, Any] = {"raw": label.raw}
            if label.error:
                detail["error"] = label.error
            decisions.append(Decision(
                sid, STAGE, CHECK_SENTENCE, label.label if label.ok else "error",
                model=model, context_id=f"s{i}", detail=detail,
            ))
            entries.append({"index": i, "text": text, "fact_checkable": value})
        errors = sum(e["fact_checkable"] is None for e in entries)
        n_fc = sum(e["fact_checkable"] is True for e in entries)
        if not entries:
            verdict, reason = "drop", "answer has no sentence"
        elif errors:
            verdict, reason = "drop", "undetermined"
        else:
            verdict, reason = "keep", "labelled"
        counts["sentences"] += len(entries)
        counts["fact_checkable"] += n_fc
        counts["errors"] += errors
        counts["kept" if verdict == "keep" else "dropped"] += 1
        keep_mask.append(verdict == "keep")
        column.append(entries)
        decisions.append(Decision(
            sid, STAGE, CHECK_SAMPLE, verdict, model=model,
            detail={"reason": reason, "sentences": len(entries), "fact_checkable": n_fc, "errors": errors},
        ))
    annotated = _with_column(samples, "sentences", pa.array(column, type=pa.list_(SENTENCE)))
    kept = annotated.filter(pa.array(keep_mask, type=pa.bool_()))
    return StageResult(stage=STAGE, kept=kept, decisions=decisions, run_id=run_id or "", counts=counts,
                       extra={"model": model, "all": annotated})


def _with_column(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    if name in table.column_names:
        table = table.drop_columns([name])
    return table.append_column(name, values)
