"""A CRAG-MM ingest as a release: the public sets as published, unfiltered, validated.

CRAG-MM is a benchmark mmcurate evaluates (CRUISE, seed 001) rather than curates, so the
release holds every conversation the ingest could read, and the quarantine says why each
other one was left out. Configs:

- ``turns`` (one row per sample: every turn of both sets): the canonical sample columns and,
  flat, the conversation's ``set`` (``single_turn`` / ``multi_turn``), ``session_id``, the
  ``turn`` index and the conversation's ``n_turns``, the four CRAG-MM labels by name
  (``domain``, ``query_category``, ``dynamism``, ``image_quality``) and ``egocentric``. The
  Hub's two repositories are the two values of ``set``; one samples config keeps every turn
  one sample (what ``mmcurate diff`` and ``why`` read), which two configs split by set would not;
- ``conversations``: one row per conversation, its turns' interaction ids in order.

Statistics: turns and conversations per set, per domain and per query category.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import pyarrow as pa

from mmcurate.benchmarks import register_part
from mmcurate.benchmarks.cragmm import CragMMConfig
from mmcurate.core.config import Settings
from mmcurate.core.ledger import Ledger
from mmcurate.core.schema import SAMPLE, with_meta
from mmcurate.evaluation.cragmm.harness import harness as lmms_harness
from mmcurate.sources.ingest import IngestResult

from ..draft import ReleaseDraft
from ..kind import Distribution, ReleaseKind
from ..plots import value_counts
from .checks import cragmm_checks

LABEL_COLUMNS = ("domain", "query_category", "dynamism", "image_quality")
TURNS = pa.schema(
    [
        *SAMPLE,
        pa.field("set", pa.string(), nullable=False),
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("turn", pa.int32(), nullable=False),
        pa.field("n_turns", pa.int32(), nullable=False),
        *(pa.field(c, pa.string(), nullable=False) for c in LABEL_COLUMNS),
        pa.field("egocentric", pa.bool_(), nullable=False),
    ]
)
CONVERSATIONS = pa.schema(
    [
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("set", pa.string(), nullable=False),
        pa.field("n_turns", pa.int32(), nullable=False),
        pa.field("interaction_ids", pa.list_(pa.string()), nullable=False),
        pa.field("sample_ids", pa.list_(pa.string()), nullable=False),
        pa.field("domain", pa.string(), nullable=False),
        pa.field("egocentric", pa.bool_(), nullable=False),
    ]
)


def distributions(tables: Mapping[str, pa.Table]) -> dict[str, Distribution]:
    turns = tables["turns"]
    return {
        "turns per domain": ("domain", "turns", dict(value_counts(turns.column("domain")).most_common())),
        "turns per query category": (
            "query category",
            "turns",
            dict(value_counts(turns.column("query_category")).most_common()),
        ),
    }


KIND = ReleaseKind(
    benchmark="cragmm",
    pretty="CRAG-MM (public sets)",
    description=(
        "CRAG-MM is the multi-modal, multi-turn RAG benchmark of the KDD Cup 2025 (Meta): egocentric and web "
        "images across 13 domains, single-turn questions and multi-turn conversations, each answer judged on "
        "its first 75 tokens as perfect, acceptable, missing or incorrect. This release holds the public sets "
        "as published, every readable conversation, for evaluating answering systems such as CRUISE."
    ),
    configs=("turns", "conversations"),
    checks=cragmm_checks,
    distributions=distributions,
    harness=lmms_harness,
)
register_part("cragmm", "release")(KIND)


def turn_rows(samples: pa.Table) -> pa.Table:
    """The ``turns`` config: samples in conversation order with their labels flat."""
    rows = [
        {
            **row,
            "set": meta["set"],
            "session_id": meta["session_id"],
            "turn": meta["turn"],
            "n_turns": meta["turns"],
            **{c: meta[c] for c in LABEL_COLUMNS},
            "egocentric": meta["egocentric"],
        }
        for row, meta in with_meta(samples)
    ]
    rows.sort(key=lambda r: (r["set"], r["session_id"], r["turn"]))
    return pa.Table.from_pylist(rows, schema=TURNS)


def conversation_rows(turns: pa.Table) -> pa.Table:
    grouped: dict[str, list[dict]] = {}
    for row in turns.select(
        ["session_id", "set", "turn", "n_turns", "source_id", "sample_id", "domain", "egocentric"]
    ).to_pylist():
        grouped.setdefault(row["session_id"], []).append(row)
    rows = []
    for session, group in grouped.items():
        group.sort(key=lambda r: r["turn"])
        first = group[0]
        rows.append(
            {
                "session_id": session,
                "set": first["set"],
                "n_turns": first["n_turns"],
                "interaction_ids": [r["source_id"] for r in group],
                "sample_ids": [r["sample_id"] for r in group],
                "domain": first["domain"],
                "egocentric": first["egocentric"],
            }
        )
    return pa.Table.from_pylist(rows, schema=CONVERSATIONS)


def _counts(turns: pa.Table, column: str) -> list[dict]:
    by: dict[str, Counter[str]] = {}
    for value, which in zip(turns.column(column).to_pylist(), turns.column("set").to_pylist()):
        by.setdefault(value, Counter())[which] += 1
    return [
        {column: value, "single_turn": c["single_turn"], "multi_turn": c["multi_turn"]}
        for value, c in sorted(by.items())
    ]


def cragmm_draft(
    settings: Settings, version: str, run_id: str, ingested: list[IngestResult], samples: pa.Table, quarantine: pa.Table
) -> ReleaseDraft:
    """The release of everything ingested (see the module docstring)."""
    cfg = CragMMConfig.of(settings)
    turns = turn_rows(samples)
    conversations = conversation_rows(turns)
    sets = Counter(conversations.column("set").to_pylist())
    per_set = Counter(turns.column("set").to_pylist())
    statistics = {
        "sets": [{"set": s, "conversations": sets[s], "turns": per_set[s]} for s in ("single_turn", "multi_turn")],
        "domains": _counts(turns, "domain"),
        "query_categories": _counts(turns, "query_category"),
    }
    return ReleaseDraft(
        kind=KIND,
        version=version,
        parent=None,
        tables={"turns": turns, "conversations": conversations},
        ledger=Ledger(),
        quarantine=quarantine,
        config=settings.resolved(),
        models=[],
        judge={"name": "none"},
        components={},
        source_files=sorted({f for r in ingested for f in r.source_files}),
        counts={
            "per_source": {r.source: {"ingested": r.samples, "quarantined": r.quarantined} for r in ingested},
            "ingested": samples.num_rows,
            "run_id": run_id,
        },
        statistics=statistics,
        seed=cfg.seed,
        notes=[
            "Published unfiltered: every readable conversation of the public sets; the quarantine lists the "
            "others with their reasons."
        ],
    )
