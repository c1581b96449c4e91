"""CRAG-MM's multi-turn rule and its two published readings, and the CRAG table per set,
domain and query category."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mmcurate.evaluation.crag import crag_metrics
from mmcurate.evaluation.cragmm.report import (
    apply_multi_turn_rule,
    conversation_scores,
    stop_after_two_misses,
    write_cragmm_evaluation,
)


@pytest.mark.parametrize(
    "grades, stopped",
    [
        (["perfect", "missing", "incorrect", "perfect", "perfect"], [False, False, False, True, True]),
        (["missing", "perfect", "incorrect", "perfect"], [False] * 4),  # never two in a row
        (["incorrect", "missing"], [False, False]),  # two in a row at the end: nothing after them
        (["acceptable", "missing", "missing", "perfect"], [False, False, False, True]),
        (["perfect"], [False]),
    ],
)
def test_two_consecutive_misses_stop_the_conversation(grades, stopped):
    assert stop_after_two_misses(grades) == stopped


def scored() -> pa.Table:
    rows = [  # set, session, turn, domain, category, grade
        ("multi_turn", "a", 0, "animal", "simple-recognition", "perfect"),
        ("multi_turn", "a", 1, "animal", "simple-knowledge", "incorrect"),
        ("multi_turn", "a", 2, "animal", "simple-knowledge", "missing"),
        ("multi_turn", "a", 3, "animal", "simple-knowledge", "perfect"),  # stopped: counts as missing
        ("multi_turn", "a", 4, "animal", "simple-knowledge", "incorrect"),  # stopped
        ("single_turn", "x", 0, "food", "simple-recognition", "incorrect"),  # single-turn: never stopped
        ("single_turn", "y", 0, "food", "simple-recognition", "failed"),
    ]
    return pa.Table.from_pylist(
        [
            {
                "set": s,
                "session_id": c,
                "turn": t,
                "domain": d,
                "query_category": q,
                "crag_grade": g,
                "timed_out": False,
            }
            for s, c, t, d, q, g in rows
        ]
    )


def test_the_competition_reading_counts_stopped_turns_as_missing_in_every_rate():
    ruled = apply_multi_turn_rule(scored(), "competition")
    assert ruled["stopped"].to_pylist() == [False, False, False, True, True, False, False]
    assert ruled["crag_grade"].to_pylist()[3:5] == ["missing", "missing"]
    multi = {r["set"]: r for r in crag_metrics(ruled, by=("set",)).to_pylist()}["multi_turn"]
    assert (multi["accuracy"], multi["missing"], multi["hallucination"]) == (0.2, 0.6, 0.2)
    conv = conversation_scores(ruled).to_pylist()
    assert conv == [{"session_id": "a", "turns": 5, "correct": 1, "hallucinated": 1, "score": 0.0}]


def test_the_later_release_keeps_each_turns_grade_in_the_rates():
    ruled = apply_multi_turn_rule(scored(), "conversation")
    multi = {r["set"]: r for r in crag_metrics(ruled, by=("set",)).to_pylist()}["multi_turn"]
    assert (multi["accuracy"], multi["missing"], multi["hallucination"]) == (0.4, 0.2, 0.4)
    assert conversation_scores(ruled).to_pylist()[0]["score"] == 0.0  # the conversation score stops alike
    with pytest.raises(ValueError, match="unknown multi-turn reading"):
        apply_multi_turn_rule(scored(), "lenient")


def test_the_table_per_set_domain_and_category(tmp_path):
    ruled = apply_multi_turn_rule(scored(), "competition")
    text = write_cragmm_evaluation(ruled, tmp_path, "t", ["a stand-in"], "competition")
    assert "## Per set" in text and "## Per domain" in text and "## Per query category" in text
    assert (
        "| single_turn | 0.00 | 50.00 | 50.00 | -50.00 | -50.00 | 2 | 0 | 1 / 0 | 0 |" in text
    )  # the failed call is missing
    assert "| food |" in text and "| simple-knowledge |" in text
    assert "- a stand-in" in text and "Multi-turn rule (competition)" in text
    assert "1 conversation, mean conversation score 0.0 %; 2 turns stopped" in text
    assert (tmp_path / "crag_by_domain.parquet").is_file() and (tmp_path / "conversations.parquet").is_file()


def test_the_egocentric_turns_are_reported_as_a_set(tmp_path):
    """Issue 43 item 6: CRAG-MM's evaluator reports the ego subset (images without a URL)."""
    ego = {("multi_turn", "a"): True, ("single_turn", "x"): True, ("single_turn", "y"): False}
    table = scored()
    table = table.append_column(
        "egocentric", pa.array([ego[(s, c)] for s, c in zip(table["set"].to_pylist(), table["session_id"].to_pylist())])
    )
    text = write_cragmm_evaluation(apply_multi_turn_rule(table, "competition"), tmp_path, "t", [], "competition")
    # a's five turns (1 perfect, 3 missing after the rule, 1 incorrect) and x's incorrect one
    assert "| ego | 16.67 | 50.00 | 33.33 | -16.67 | -16.67 | 6 | 0 | 0 / 0 | 0 |" in text
    assert "| single_turn | 0.00 | 50.00 | 50.00 | -50.00 | -50.00 | 2 | 0 | 1 / 0 | 0 |" in text
    by_set = pq.read_table(tmp_path / "crag_by_set.parquet").column("set").to_pylist()
    assert by_set == ["ego", "multi_turn", "single_turn"]


def test_the_title_counts_turns_and_names_the_variants():
    """Issue 42 item 21: 4 turns answered by CRUISE and 3 ablations are "4 turns x 4 variants",
    not "16 turns"; one variant (or none) counts its turns, per task."""
    from mmcurate.evaluation.cragmm.report import run_title

    variants = ["cruise", "no-cov", "no-cov-no-consistency", "rag-agent"]
    rows = [{"task": "all", "variant": v, "sample_id": f"t{n}"} for v in variants for n in range(4)]
    assert run_title("m", "1.0.0", "cruise", pa.Table.from_pylist(rows)) == (
        "m on cragmm 1.0.0 (cruise system, all turns, 4 turns x 4 variants (cruise, no-cov, no-cov-no-consistency, "
        "rag-agent))"
    )
    rows = [{"task": t, "sample_id": f"t{n}"} for t in ("1", "3") for n in range(3)]
    assert (
        run_title("m", "1.0.0", "plain", pa.Table.from_pylist(rows))
        == "m on cragmm 1.0.0 (plain system, task 1, task 3, 6 turns)"
    )
