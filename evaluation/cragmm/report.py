"""CRAG-MM's scores of an evaluation run: the CRAG table (accuracy, missing, hallucination,
truthfulness over all turns; ``evaluation.crag``) per set (single_turn, multi_turn and ``ego``,
the egocentric turns of both, as the official evaluator reports them), per domain and per query
category, with CRAG-MM's multi-turn rule.

Multi-turn rule (the competition's ``local_evaluation.py``, ``calculate_scores``, as in the
CRUISE team's copy of the starter kit, hu-xiaoqian/meta; and facebookresearch/CRAG-MM
``evaluation/evaluation_utils.py``): in a conversation, once two consecutive turns are not
correct (missing or incorrect), every later turn counts as missing; a conversation's score is
mean(correct) - mean(hallucination) over its turns, and the set's multi-turn score the mean
over conversations. A turn is correct when graded perfect or acceptable (CRAG-MM's judge is
binary; acceptable is the four-grade rubric's "useful, minor errors").

The two published scripts differ on one point, a named switch (``cruise.multi_turn_scoring``):
``competition`` (the default, the KDD Cup scoring the paper's results come from): the stopped
turns count as missing in every rate; ``conversation`` (the later facebookresearch/CRAG-MM
release): the rates read every turn's own grade and only the conversation score stops.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mmcurate.core.plural import counted
from mmcurate.core.tables import write_table

from ..crag import crag_markdown, crag_metrics

CORRECT = ("perfect", "acceptable")
ALL_TURNS = "all"  # the task column of a run over every turn (no --task)
CELL = (
    "task",
    "variant",
)  # what a run chooses (the task; the system or one of its ablations) (``evaluation.runs``); a column a run lacks is no key
ANSWERS_FILE = "answers.parquet"
STOPPED = "missing"
EGO = "ego"  # the egocentric turns (images without a URL), which CRAG-MM's evaluator reports as a set of their own
READINGS = {
    "competition": "turns after two consecutive misses or errors count as missing in every rate (KDD Cup 2025 "
    "local_evaluation.py)",
    "conversation": "every turn keeps its own grade in the rates; only the conversation score stops after two "
    "consecutive misses or errors (facebookresearch/CRAG-MM evaluation_utils.py)",
}


def stop_after_two_misses(grades: Sequence[str]) -> list[bool]:
    """Which turns of one conversation (grades in turn order) the multi-turn rule stops."""
    stopped = [False] * len(grades)
    for i in range(1, len(grades)):
        if grades[i - 1] not in CORRECT and grades[i] not in CORRECT:
            for j in range(i + 1, len(grades)):
                stopped[j] = True
            break
    return stopped


def apply_multi_turn_rule(scored: pa.Table, reading: str = "competition") -> pa.Table:
    """``scored`` (CRAG-scored turns with ``set``, ``session_id``, ``turn``) with ``stopped``,
    ``turn_grade`` (the grade after the rule) and ``crag_grade`` as the rates read it."""
    if reading not in READINGS:
        raise ValueError(f"unknown multi-turn reading {reading!r}; known: {', '.join(READINGS)}")
    rows = scored.to_pylist()
    by_session: dict[tuple[str | None, str], list[int]] = {}  # (variant, session): each row of Table 1 alone
    for n, row in enumerate(rows):
        if row["set"] == "multi_turn":
            by_session.setdefault((row.get("variant"), row["session_id"]), []).append(n)
    stopped = [False] * len(rows)
    for members in by_session.values():
        members.sort(key=lambda n: rows[n]["turn"])
        for n, stop in zip(members, stop_after_two_misses([rows[n]["crag_grade"] for n in members])):
            stopped[n] = stop
    own = scored.column("crag_grade").to_pylist()
    after = [STOPPED if stop else grade for stop, grade in zip(stopped, own)]
    out = scored.append_column("stopped", pa.array(stopped, pa.bool_()))
    out = out.append_column("turn_grade", pa.array(after, pa.string()))
    if reading == "competition":
        out = out.set_column(out.schema.get_field_index("crag_grade"), "crag_grade", pa.array(after, pa.string()))
    return out


def run_title(model: str, version: str, system: str, ruled: pa.Table) -> str:
    """The table's title: the scopes run (``task N`` or all turns) and the turns answered; with
    ablations, turns x variants, each variant named (every variant answers the same turns)."""
    tasks = ruled.column("task").to_pylist()
    scopes = [f"task {t}" if t != ALL_TURNS else "all turns" for t in dict.fromkeys(tasks)]
    turns = counted(len(set(zip(tasks, ruled.column("sample_id").to_pylist()))), "turn")
    variants = list(dict.fromkeys(ruled.column("variant").to_pylist())) if "variant" in ruled.column_names else []
    if len(variants) > 1:
        turns += f" x {len(variants)} variants ({', '.join(variants)})"
    return f"{model} on cragmm {version} ({system} system, {', '.join(scopes)}, {turns})"


def cells(ruled: pa.Table) -> list[str]:
    """The cell columns that tell the folder's runs apart (``CELL`` with more than one value):
    every table groups by them first."""
    return [k for k in CELL if k in ruled.column_names and len(set(ruled.column(k).to_pylist())) > 1]


def conversation_scores(ruled: pa.Table) -> pa.Table:
    """Per multi-turn conversation (of each cell): turns, correct, hallucinated (after the rule) and its score."""
    keys = cells(ruled)
    groups: dict[tuple, list[str]] = {}
    for row in ruled.select([*keys, "set", "session_id", "turn_grade"]).to_pylist():
        if row["set"] == "multi_turn":
            groups.setdefault((*(row[k] for k in keys), row["session_id"]), []).append(row["turn_grade"])
    rows = []
    for key, grades in sorted(groups.items(), key=lambda item: tuple(map(str, item[0]))):
        correct = sum(g in CORRECT for g in grades)
        wrong = sum(g == "incorrect" for g in grades)
        rows.append(
            {
                **dict(zip([*keys, "session_id"], key)),
                "turns": len(grades),
                "correct": correct,
                "hallucinated": wrong,
                "score": (correct - wrong) / len(grades),
            }
        )
    schema = pa.schema(
        [
            *(ruled.schema.field(k) for k in keys),
            ("session_id", pa.string()),
            ("turns", pa.int64()),
            ("correct", pa.int64()),
            ("hallucinated", pa.int64()),
            ("score", pa.float64()),
        ]
    )
    return pa.Table.from_pylist(rows, schema=schema)


def with_ego_set(ruled: pa.Table) -> pa.Table:
    """``ruled`` and, once more under the set ``ego``, its egocentric turns (of either set): the
    per-set table's rows, the ego set beside single_turn and multi_turn."""
    if "egocentric" not in ruled.column_names:
        return ruled
    ego = ruled.filter(pc.equal(ruled.column("egocentric"), True))
    where = ruled.schema.get_field_index("set")
    return pa.concat_tables(
        [
            ruled,
            ego.set_column(
                where, ruled.schema.field(where), pa.array([EGO] * ego.num_rows, ruled.schema.field(where).type)
            ),
        ]
    )


def write_cragmm_evaluation(ruled: pa.Table, out: Path, title: str, notes: Sequence[str], reading: str) -> str:
    """Write answers and scores into ``out`` and return the markdown: with ablations, Table 1 (one
    row per ``variant``, over all turns); then, for the system itself (the first variant), the CRAG
    table per set, per domain and per query category, timed-out turns, and the multi-turn score."""
    out.mkdir(parents=True, exist_ok=True)
    write_table(ruled, out / ANSWERS_FILE)
    sections = [
        f"# {title}",
        "\n".join(f"- {note}" for note in [*notes, f"Multi-turn rule ({reading}): {READINGS[reading]}."]),
    ]
    if "variant" in ruled.column_names:
        order = list(dict.fromkeys(ruled.column("variant").to_pylist()))
        if len(order) > 1:
            table_1 = crag_metrics(ruled, by=("variant",))
            table_1 = table_1.take([table_1.column("variant").to_pylist().index(v) for v in order])
            write_table(table_1, out / "crag_by_variant.parquet")
            sections.append(
                f"## Table 1: the system and its ablations (all turns)\n\n"
                f"{crag_markdown(table_1, ('variant',), timed=True)}"
            )
        ruled = ruled.filter(pc.equal(ruled.column("variant"), order[0]))
    first = cells(ruled)
    for key, heading in (
        ("set", "Per set (ego: the egocentric turns of both)"),
        ("domain", "Per domain"),
        ("query_category", "Per query category"),
    ):
        metrics = crag_metrics(with_ego_set(ruled) if key == "set" else ruled, by=(*first, key))
        write_table(metrics, out / f"crag_by_{key}.parquet")
        sections.append(f"## {heading}\n\n{crag_markdown(metrics, (*first, key), timed=True)}")
    timed = [r for r in ruled.select(["set", "timed_out"]).to_pylist() if r["timed_out"]]
    sections.append(
        f"## Time budget\n\n{len(timed)} of {counted(ruled.num_rows, 'turn')} went over the per-turn "
        "budget: failures (no answer), counted in the timed-out column and in missing."
    )
    conversations = conversation_scores(ruled)
    if conversations.num_rows:
        write_table(conversations, out / "conversations.parquet")
        scores: list[Any] = conversations.column("score").to_pylist()
        stopped = sum(ruled.column("stopped").to_pylist())
        sections.append(
            f"## Multi-turn\n\n{counted(conversations.num_rows, 'conversation')}, mean conversation score "
            f"{100 * sum(scores) / len(scores):.1f} %; {counted(stopped, 'turn')} stopped by the rule."
        )
    text = "\n\n".join(sections) + "\n"
    (out / "table.md").write_text(text)
    return text
