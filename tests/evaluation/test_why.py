"""``mmcurate why EVALDIR SAMPLE`` on a verify-first or CRUISE run (issue 31 item 5): it printed
"initialization failed: None" (Kestrel's reading of a trace it did not hold); it prints what
the trace says: each check that ran and the decision with its reason."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from mmcurate.evaluation.verify_first import VerifyFirst, verify_first_answers
from mmcurate.evaluation.why import item_lines


def run_folder(tmp_path, rows):
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "answers.parquet")
    return tmp_path


def test_a_verify_first_item_shows_its_checks_and_why_it_abstained(world, make, tmp_path):
    world.add(
        "m",
        [
            {
                "when_all": ["Question: Q1", "OUTSIDE KNOWLEDGE:"],
                "answer": "OUTSIDE KNOWLEDGE: yes\nTIME-SENSITIVE: no",
            },
            {"when_all": ["Question: Q1", "Evidence:"], "when_none": ["Proposed answer"], "answer": "1889"},
            {"when_all": ["Question: Q1"], "when_none": ["Proposed answer", "Evidence:"], "answer": "1901"},
            {"when_all": ["Question: Q1", "Proposed answer 1"], "answer": "no"},
            {
                "when_all": ["Question: Q2", "OUTSIDE KNOWLEDGE:"],
                "answer": "OUTSIDE KNOWLEDGE: no\nTIME-SENSITIVE: yes",
            },
        ],
        default=None,
    )
    evidence = [{"context_id": "g", "modality": "text", "text": "Built in 1889.", "image": None, "title": "T"}]
    rows = [make.sample("s1", "Q1 which year?", ["x"]), make.sample("s2", "Q2 price today?", ["x"])]
    out = verify_first_answers(rows, [evidence, evidence], world.pool, VerifyFirst("m"), keys=["k1", "k2"])
    folder = run_folder(
        tmp_path,
        [
            {**r, "scenario": "oracle", "n_negatives": 0, "system": "verify-first", "grade": "NOT_ATTEMPTED"}
            for r in out.to_pylist()
        ],
    )
    lines = item_lines(folder, rows[0]["sample_id"])
    assert not any("initialization failed" in line for line in lines)
    assert "  router (m): needs outside knowledge yes, time-sensitive no" in lines
    assert "  answer with context: 1889" in lines and "  answer without context: 1901" in lines
    assert "  consistent: no" in lines
    assert lines[-1] == "  decision: abstain: the answers with and without context disagree"
    lines = item_lines(folder, rows[1]["sample_id"])
    assert lines[-1] == "  decision: abstain: time-sensitive question and no retrieved context"
    assert "  context: available 1, retrieval skipped by the router, used 0" in lines


def test_a_cruise_turn_abstained_by_the_retrieval_gate_says_so(tmp_path):
    """A CRUISE trace as ``evaluation.cragmm.cruise`` writes it: router, summary, retrieval, the gate."""
    label = {"label": "yes", "raw": ["Yes."]}
    trace = {
        "checks": ["router"],
        "router": {"model": "m", "needs_outside_knowledge": label, "time_sensitive": label},
        "summary": {"model": "eyes", "text": "a ticket machine"},
        "context": {"retrieval": "yes", "used": 0, "score": 0.0},
        "retrieval_gate": {"reading": "score", "score": 0.0, "tau_ret": 0.5},
        "decision": "abstain",
        "reason": "time-sensitive question and retrieval score 0 below tau_ret 0.5",
    }
    folder = run_folder(
        tmp_path,
        [{"sample_id": "t1", "answer": "I don't know", "system": "cruise", "trace": json.dumps(trace, sort_keys=True)}],
    )
    lines = item_lines(folder, "t1")
    assert lines[1:] == [
        "  router (m): needs outside knowledge yes, time-sensitive yes",
        "  image summary (eyes): a ticket machine",
        "  context: retrieval yes, score 0.0, used 0",
        "  retrieval gate (score reading): score 0, tau_ret 0.5",
        "  decision: abstain: time-sensitive question and retrieval score 0 below tau_ret 0.5",
    ]


def test_a_cruise_run_with_ablations_names_each_variant_block(tmp_path):
    """Issue 42 item 21: one turn answered by CRUISE and its ablations is one block per variant,
    each headed by its variant and CRAG grade (they were four unnamed blocks)."""
    trace = json.dumps({"decision": "answer"}, sort_keys=True)
    folder = run_folder(
        tmp_path,
        [
            {
                "sample_id": "t1",
                "task": "all",
                "variant": variant,
                "answer": "Paris",
                "crag_grade": grade,
                "system": "cruise",
                "trace": trace,
            }
            for variant, grade in (("cruise", "perfect"), ("no-cov", "incorrect"))
        ],
    )
    heads = [line for line in item_lines(folder, "t1") if not line.startswith("  ")]
    assert heads == [
        "task all, variant cruise, answer Paris, crag_grade perfect, system cruise",
        "task all, variant no-cov, answer Paris, crag_grade incorrect, system cruise",
    ]
