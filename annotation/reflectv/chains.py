"""The columns the ReflectV stages add to the sample table, and how they read and write them.

``turns`` holds one struct per student answer of the dialogue: the answer with the
teacher's score and feedback (from ``dialogue``), then, for each reflective turn (every
turn but the last), the grounding keyword and first-person reflection (``reflection``),
the colour, mark type, number of marks, marked image and the reflection with its mark
phrase (``grounding``) and the verifier's answer (``visual``). ``origin`` says whether the
dialogue was built by the models or ingested (FIRE).

``chain_issue`` is null while the sample can still become a multi-turn chain; the first
stage that cannot do its part (no keyword, nothing found in the image, marks the verifier
rejects, ...) writes why there, later stages skip the sample, and formatting collapses it to
a QA pair. Its final answer has already passed the trajectory filter, so it stays usable.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from mmcurate.core.errors import MmcurateError
from mmcurate.core.plural import counted

TURN = pa.struct(
    [
        pa.field("answer", pa.string(), nullable=False),
        pa.field("score", pa.int32(), nullable=False),
        pa.field("feedback", pa.string(), nullable=False),
        pa.field("keyword", pa.string()),
        pa.field("reflection", pa.string()),
        pa.field("color", pa.string()),
        pa.field("mark_type", pa.string()),
        pa.field("marks", pa.int32()),
        pa.field("marked_image", pa.string()),  # sha256 in the image store
        pa.field("think", pa.string()),  # the reflection with its mark phrase
        pa.field("verified", pa.bool_()),
    ]
)
TURNS, ISSUE, ORIGIN = "turns", "chain_issue", "origin"
BUILT, INGESTED = "built", "ingested"


def new_turn(answer: str, score: int, feedback: str) -> dict[str, Any]:
    return {"answer": answer, "score": score, "feedback": feedback, **{f.name: None for f in list(TURN)[3:]}}


def turns_of(table: pa.Table) -> list[list[dict[str, Any]]]:
    return table.column(TURNS).to_pylist()


def issues_of(table: pa.Table) -> list[str | None]:
    return table.column(ISSUE).to_pylist()


def meta_of(row: dict[str, Any]) -> dict[str, Any]:
    meta = json.loads(row.get("meta") or "{}")
    return meta if isinstance(meta, dict) else {}


def eligible(turns: list[dict[str, Any]], issue: str | None) -> bool:
    """Whether a sample is still on its way to a multi-turn chain."""
    return issue is None and len(turns) >= 2


def with_columns(table: pa.Table, columns: dict[str, pa.Array]) -> pa.Table:
    """``table`` with each named column replaced or appended."""
    for name, values in columns.items():
        if name in table.column_names:
            table = table.drop_columns([name])
        table = table.append_column(name, values)
    return table


def with_chains(table: pa.Table, turns: list[list[dict[str, Any]]], issues: list[str | None]) -> pa.Table:
    return with_columns(table, {TURNS: pa.array(turns, type=pa.list_(TURN)), ISSUE: pa.array(issues, type=pa.string())})


def require_chains(table: pa.Table, stage: str) -> None:
    missing = [c for c in (TURNS, ISSUE) if c not in table.column_names]
    if missing:
        raise MmcurateError(
            f"the {stage} stage needs the dialogue stage's output (missing {counted(len(missing), 'column')}: "
            f"{', '.join(missing)})"
        )
