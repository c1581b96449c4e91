"""CRAG-MM's single-turn conversations as a harness task (seed 001, Table 1's vision-only
baseline): the turn's image and question with the prompt that asks for the answer and no
abstention (the baseline "attempts to answer all questions", L274), as ``mmcurate evaluate
--system plain`` asks it (``evaluation.cragmm.cruise.VISION_ONLY``); the first 75 tokens of the answer
(the word-piece rule) graded perfect / acceptable / missing / incorrect by the CRAG judge of the offline
configuration (the lexical SimpleQA judge, its grades mapped), and CRAG's accuracy,
missing, hallucination and truthfulness computed by ``crag.crag_metrics``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from mmcurate.gating import prompts
from mmcurate.judging.answers import numeric_ranges
from mmcurate.judging.simpleqa import JudgeItem, LexicalJudge

from ..crag import MAX_TOKENS, RATES, MappedJudge, crag_metrics, wordpiece
from ..harness import Doc, Harness, HarnessTask, Records
from .cruise import VISION_ONLY

STAGE = "harness"
GENERATION = {"max_new_tokens": 128, "temperature": 0.0, "do_sample": False}


def _request(doc: Doc) -> list[dict]:
    return prompts.build_messages(VISION_ONLY, doc["question"], doc["images"], None)


def _record(doc: Doc, answer: str) -> dict[str, Any]:
    cut, tokens = wordpiece().cut(answer, MAX_TOKENS)
    item = JudgeItem(doc["sample_id"], doc["question"], list(doc["answers"]), cut, numeric_ranges(doc.get("meta")))
    judgement = MappedJudge(LexicalJudge()).grade([item], STAGE)[0]
    return {
        "sample_id": doc["sample_id"],
        "answer": answer,
        "judged_answer": cut,
        "answer_tokens": tokens,
        "crag_grade": judgement.grade,
    }


def rate(name: str) -> Any:
    def aggregate(records: Records) -> float | None:
        rows = crag_metrics(pa.Table.from_pylist([{"crag_grade": r["crag_grade"]} for r in records]), by=()).to_pylist()
        return rows[0][name] if rows else None

    aggregate.__name__ = name
    return aggregate


def harness(manifest: Mapping[str, Any]) -> Harness:
    task = HarnessTask(
        name="single_turn",
        config="turns",
        request=_request,
        target=lambda doc: " | ".join(doc["answers"]),
        record=_record,
        metrics={name: rate(name) for name in RATES},
        keep=lambda doc: doc["set"] == "single_turn",
        generation=GENERATION,
        description="CRAG-MM single-turn conversations, vision-only baseline",
    )
    return Harness(
        (task,),
        note=(
            "CRAG-MM's single-turn conversations answered from the image and the question (the vision-only baseline "
            f"of Table 1); the first {MAX_TOKENS} tokens (BERT WordPiece) graded by the lexical SimpleQA judge with its "
            "grades mapped to CRAG's (never acceptable), rates over all queries as `mmcurate evaluate` computes them. "
            "CRUISE's verification-first system retrieves and asks several checks per turn: run it with "
            "`mmcurate evaluate --system cruise`."
        ),
    )
