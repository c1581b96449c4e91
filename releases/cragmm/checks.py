"""CRAG-MM's Great Expectations suite: every turn a sample with its question, answer and a
decodable image, labels from the dataset card's ClassLabel names, conversations whole
(turns 0..n-1, one image, single-turn ones of one turn)."""

from __future__ import annotations

import great_expectations.expectations as gxe
import pandas as pd

from mmcurate.sources.cragmm import CATEGORIES, DOMAINS, DYNAMISMS, MULTI, QUALITIES, SINGLE

from ..kind import FrameCheck, WrittenRelease
from ..quality_frames import image_decodes
from ..validation import columns_rule, sample_rules

TURN_DERIVED = ["question_chars", "n_answers", "images_decode"]
CONVERSATION_DERIVED = ["turns_in_order", "one_turn_if_single"]


def _turn_frame(release: WrittenRelease) -> tuple[pd.DataFrame, list[str]]:
    rows, columns = [], None
    for batch in release.batches("turns"):
        columns = columns or batch.schema.names
        for row in batch.to_pylist():
            rows.append(
                {
                    **{
                        k: v
                        for k, v in row.items()
                        if k not in ("images", "answers", "gold_contexts", "negative_contexts")
                    },
                    "images": len(row["images"]),
                    "answers": len(row["answers"]),
                    "gold_contexts": len(row["gold_contexts"]),
                    "negative_contexts": len(row["negative_contexts"]),
                    "question_chars": len((row["question"] or "").strip()),
                    "n_answers": sum(1 for a in row["answers"] if (a or "").strip()),
                    "images_decode": bool(row["images"]) and all(image_decodes(i) for i in row["images"]),
                }
            )
    return pd.DataFrame(rows), list(columns or [])


def cragmm_checks(release: WrittenRelease) -> tuple[list[FrameCheck], list[str]]:
    turns, turn_columns = _turn_frame(release)
    conversations = release.table("conversations")
    by_session = turns.groupby("session_id")["turn"].apply(sorted).to_dict() if len(turns) else {}
    conv = conversations.drop_columns(["interaction_ids", "sample_ids"]).to_pandas()
    conv["turns_in_order"] = [by_session.get(s) == list(range(n)) for s, n in zip(conv["session_id"], conv["n_turns"])]
    conv["one_turn_if_single"] = [(s != SINGLE) or n == 1 for s, n in zip(conv["set"], conv["n_turns"])]
    return [
        FrameCheck(
            "turns",
            turns,
            "sample_id",
            [
                *sample_rules(turn_columns, TURN_DERIVED, ("question_chars", "n_answers")),
                gxe.ExpectColumnValuesToBeInSet(column="set", value_set=[SINGLE, MULTI]),
                gxe.ExpectColumnValuesToBeInSet(column="domain", value_set=list(DOMAINS)),
                gxe.ExpectColumnValuesToBeInSet(column="query_category", value_set=list(CATEGORIES)),
                gxe.ExpectColumnValuesToBeInSet(column="dynamism", value_set=list(DYNAMISMS)),
                gxe.ExpectColumnValuesToBeInSet(column="image_quality", value_set=list(QUALITIES)),
                gxe.ExpectColumnValuesToBeBetween(column="images", min_value=1, max_value=1),
            ],
        ),
        FrameCheck(
            "conversations",
            conv,
            "session_id",
            [
                columns_rule(
                    [c for c in conversations.column_names if c not in ("interaction_ids", "sample_ids")],
                    CONVERSATION_DERIVED,
                ),
                gxe.ExpectColumnValuesToBeUnique(column="session_id"),
                gxe.ExpectColumnValuesToBeInSet(column="turns_in_order", value_set=[True]),
                gxe.ExpectColumnValuesToBeInSet(column="one_turn_if_single", value_set=[True]),
                gxe.ExpectColumnValuesToBeBetween(column="n_turns", min_value=1, max_value=6),
            ],
        ),
    ], []
