"""The ``dialogues`` config of a ReflectV release: every dialogue with its fate."""

from __future__ import annotations

import pyarrow as pa

from mmcurate.annotation.reflectv.formatting import CONVERSATION_TURN, MULTI, SAMPLE_FIELDS, SINGLE

DIALOGUE_TURN = pa.struct(
    [
        pa.field("answer", pa.string(), nullable=False),
        pa.field("score", pa.int32(), nullable=False),
        pa.field("feedback", pa.string(), nullable=False),
    ]
)
DIALOGUE = pa.schema(
    [
        *SAMPLE_FIELDS,
        pa.field("origin", pa.string(), nullable=False),  # built | ingested
        pa.field("student_turns", pa.int32(), nullable=False),
        pa.field("dialogue", pa.list_(DIALOGUE_TURN), nullable=False),
        # the dialogue rendered as a trajectory as far as the pipeline built it (``formatting.render_turns``):
        # what Table 6's raters see for every subset
        pa.field("trajectory", pa.list_(CONVERSATION_TURN), nullable=False),
        pa.field("fate", pa.string(), nullable=False),  # multi_turn | single_turn | discarded | dropped
        pa.field("reason", pa.string()),
        pa.field("chain_issue", pa.string()),  # why a stage after the filter rejected the multi-turn chain
    ]
)
DISCARDED, DROPPED = "discarded", "dropped"
FATES = (MULTI, SINGLE, DISCARDED, DROPPED)
