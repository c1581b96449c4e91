"""RefLVQA stage 3 (seed paper 3.3): split answers into sentences, mark the fact-checkable ones.

Each sample's answer (``answers[0]``: a Reddit sample has exactly one) is split with
``core.text.split_sentences``. An LLM labels every sentence ``yes`` (it asserts at least one
claim that could be checked against a reliable source) or ``no``; the reply is read by
``models.labels`` (strict, one retry), as in every LLM check. The offline stand-in
``heuristic`` labels with ``heuristic_label`` instead.

The output table is the input plus a column ``sentences`` (``core.schema.SENTENCE``, with no
citations yet). A sentence whose label
failed (call failed or unparsable after the retry) gets ``fact_checkable`` null and a
ledger verdict ``error``; its sample is held out of ``kept`` (verdict ``drop``, reason
``undetermined``) rather than released with a guessed label. A rerun asks again only for
the failures (the response cache stores successes only). A sample whose answer has no
sentence is dropped too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from mmcurate.core.errors import MmcurateError
from mmcurate.core.ledger import Decision
from mmcurate.core.schema import SENTENCE
from mmcurate.core.specs import Heuristic, LabellerSpec, coerce
from mmcurate.core.stages import Stage, StageContext, StageResult
from mmcurate.core.text import split_sentences
from mmcurate.models.labels import Label, ask_labels, first_token_label, label_request
from mmcurate.models.requests import ChatRequest

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
YES_NO = ("yes", "no")


def factcheck_prompt(question: str, sentence: str) -> str:
    return (
        f"The sentence comes from an answer to this question: {question}\n"
        f"Sentence: {sentence}\n"
        "Is the sentence fact-checkable? Reply with exactly one word: yes or no."
    )


def sentence_request(row: dict[str, Any], index: int, sentence: str) -> ChatRequest:
    """Is sentence ``index`` of ``row``'s answer fact-checkable? A yes/no label request."""
    return label_request(f"{row['sample_id']}/s{index}", SYSTEM, factcheck_prompt(row["question"], sentence), TEMPLATE)


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


@dataclass
class FactCheckable(Stage):
    """Split every answer into sentences and label each fact-checkable or not."""

    labeller: LabellerSpec
    splitter: Callable[[str], list[str]] = field(default=split_sentences)
    name = STAGE

    def __post_init__(self) -> None:
        if self.labeller is None:
            raise MmcurateError("the fact-checkable stage needs a labeller (reflvqa.factcheck_model)")
        self.labeller = coerce(LabellerSpec, self.labeller)

    def _labels(self, ctx: StageContext, rows: list[dict], split: list[list[str]]) -> list[Label]:
        if isinstance(self.labeller, Heuristic):
            return [heuristic_label(s) for sentences in split for s in sentences]
        requests = [sentence_request(r, i, s) for r, sentences in zip(rows, split) for i, s in enumerate(sentences)]
        try:
            return ask_labels(
                ctx.pool.client(self.labeller.name),
                requests,
                YES_NO,
                REMINDER,
                STAGE,
                lambda response: first_token_label(response, YES_NO),
            )
        finally:
            ctx.pool.release(self.labeller.name)

    def run(self, samples: pa.Table, ctx: StageContext) -> StageResult:
        model = str(self.labeller)
        rows = samples.to_pylist()
        split = [[s for s in self.splitter(r["answers"][0] if r["answers"] else "") if s.strip()] for r in rows]
        labels = self._labels(ctx, rows, split)
        decisions: list[Decision] = []
        column: list[list[dict]] = []
        keep_mask: list[bool] = []
        counts = {"input": len(rows), "kept": 0, "dropped": 0, "sentences": 0, "fact_checkable": 0, "errors": 0}
        cursor = 0
        for row, sentences in zip(rows, split):
            sid = row["sample_id"]
            entries: list[dict[str, Any]] = []
            for i, text in enumerate(sentences):
                label = labels[cursor]
                cursor += 1
                value = None if not label.ok else label.label == "yes"
                detail: dict[str, Any] = {"raw": label.raw}
                if label.error:
                    detail["error"] = label.error
                decisions.append(
                    Decision(
                        sid,
                        STAGE,
                        CHECK_SENTENCE,
                        label.label if label.ok else "error",
                        model=model,
                        context_id=f"s{i}",
                        detail=detail,
                    )
                )
                entries.append(
                    {
                        "index": i,
                        "text": text,
                        "fact_checkable": value,
                        "text_citations": [],
                        "image_citations": [],
                        "flagged": False,
                    }
                )
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
            decisions.append(
                Decision(
                    sid,
                    STAGE,
                    CHECK_SAMPLE,
                    verdict,
                    model=model,
                    detail={"reason": reason, "sentences": len(entries), "fact_checkable": n_fc, "errors": errors},
                )
            )
        annotated = _with_column(samples, "sentences", pa.array(column, type=pa.list_(SENTENCE)))
        kept = annotated.filter(pa.array(keep_mask, type=pa.bool_()))
        return StageResult(
            stage=STAGE,
            kept=kept,
            decisions=decisions,
            run_id=ctx.run_id,
            counts=counts,
            extra={"model": model},
            components={"factcheck": model},
        )


def _with_column(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    if name in table.column_names:
        table = table.drop_columns([name])
    return table.append_column(name, values)
