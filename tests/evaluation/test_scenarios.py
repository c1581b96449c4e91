"""The four evaluation scenarios: which evidence is shown, deterministic order, abstention prompts."""
from __future__ import annotations

import pytest

from mmcurate.gating import prompts
from mmcurate.gating.requests import text_of
from mmcurate.evaluation.scenarios import RESULTS, evaluate, scenario_contexts, scenario_request


def ids(contexts):
    return None if contexts is None else [c["context_id"] for c in contexts]


@pytest.fixture
def row(make):
    negatives = [make.text(f"n{i}", f"NEG-{i} passage") for i in range(6)]
    gold = [make.text("g1", "GOLD-1 passage", "Gold one"), make.image("g2", "cd" * 32, "Gold image")]
    return make.sample("s", "Q-S which city?", ["Paris"], gold=gold, negatives=negatives)


def test_scenarios_show_the_right_evidence(row):
    assert scenario_contexts(row, "parametric") is None
    assert sorted(ids(scenario_contexts(row, "oracle"))) == ["g1", "g2"]
    assert sorted(ids(scenario_contexts(row, "realistic"))) == ["g1", "g2", "n0", "n1"]
    assert sorted(ids(scenario_contexts(row, "realistic", 4))) == ["g1", "g2", "n0", "n1", "n2", "n3"]
    assert sorted(ids(scenario_contexts(row, "adversarial", 3))) == ["n0", "n1", "n2"]
    assert sorted(ids(scenario_contexts(row, "realistic", 10))) == ["g1", "g2"] + [f"n{i}" for i in range(6)]
    for bad in (0, 11):
        with pytest.raises(ValueError):
            scenario_contexts(row, "realistic", bad)
    with pytest.raises(ValueError):
        scenario_contexts(row, "closed-book")


def test_messages_per_scenario(row):
    parametric = text_of(scenario_request(row, "parametric").messages)
    assert "Evidence:" not in parametric and "GOLD-1" not in parametric and "Q-S which city?" in parametric
    oracle = scenario_request(row, "oracle").messages
    assert "[1]" in text_of(oracle) and "GOLD-1 passage" in text_of(oracle) and "NEG-" not in text_of(oracle)
    assert {"type": "image", "sha256": "cd" * 32} in oracle[1]["content"]  # gold image as an image part
    adversarial = text_of(scenario_request(row, "adversarial", 2).messages)
    assert "GOLD-1" not in adversarial and "NEG-0" in adversarial and "NEG-1" in adversarial


def test_shuffle_is_deterministic_and_seeded(row):
    first = ids(scenario_contexts(row, "realistic", 6, seed=7))
    assert first == ids(scenario_contexts(row, "realistic", 6, seed=7))
    orders = {tuple(ids(scenario_contexts(row, "realistic", 6, seed=s))) for s in range(10)}
    assert len(orders) > 1
    assert scenario_request(row, "realistic", 6, seed=7).messages == scenario_request(row, "realistic", 6, seed=7).messages


def test_abstention_prompts_differ():
    systems = {level: prompts.eval_template(level) for level in ("soft", "moderate", "severe")}
    assert len({t.system for t in systems.values()}) == 3
    assert len({t.id for t in systems.values()}) == 3
    assert all("I don't know" in t.system for t in systems.values())
    with pytest.raises(ValueError):
        prompts.eval_template("extreme")


def test_evaluate_grades_every_answer(world, make, row):
    other = make.sample("t", "Q-T?", ["Rome"], source="webqa", negatives=[make.text("m0", "NEG-x")])
    # answers with gold evidence, abstains without it; fails on Q-T in the adversarial setting
    m = world.add("m", [
        {"when_all": ["GOLD-1"], "answer": "Paris"},
        {"when_all": ["GOLD-t"], "answer": "Rome"},
        {"when_all": ["Q-T", "NEG-x"], "when_none": ["GOLD-t"], "answer": "FAIL-SENTINEL"},
        {"when_all": ["NEG-"], "answer": "Berlin"},
    ], default="I don't know")
    out = evaluate(make.table([row, other]), world.pool, world.judge, m,
                   ["parametric", "oracle", "realistic", "adversarial"], [1, 2], "severe", seed=0, run_id="e")
    assert out.schema == RESULTS
    got = {(r["sample_id"], r["scenario"], r["n_negatives"]): r["grade"] for r in out.to_pylist()}
    s, t = row["sample_id"], other["sample_id"]
    assert got[(s, "parametric", 0)] == "NOT_ATTEMPTED"
    assert got[(s, "oracle", 0)] == "CORRECT"
    assert got[(s, "realistic", 1)] == got[(s, "realistic", 2)] == "CORRECT"
    assert got[(s, "adversarial", 1)] == "INCORRECT"
    assert got[(t, "oracle", 0)] == "CORRECT"
    assert got[(t, "adversarial", 1)] == "INCORRECT"  # FAIL-SENTINEL is just a wrong answer
    assert out.num_rows == 2 * (1 + 1 + 2 + 2)
    shown = {(r["sample_id"], r["scenario"], r["n_negatives"]): r["n_contexts"] for r in out.to_pylist()}
    assert shown[(t, "adversarial", 2)] == 1  # only one negative available
    assert shown[(s, "realistic", 2)] == 4
    assert set(out.column("abstention").to_pylist()) == {"severe"}


def test_evaluate_keeps_failed_calls_as_rows(world, make, row):
    m = world.add("m", [{"when_all": ["GOLD-1"], "answer": "Paris"}], default=None)
    out = evaluate(make.table([row]), world.pool, world.judge, m, ["oracle", "parametric"], 2, "moderate", 0, "e")
    grades = dict(zip(out.column("scenario").to_pylist(), out.column("grade").to_pylist()))
    assert grades == {"parametric": "FAILED", "oracle": "CORRECT"}
    [failed] = [r for r in out.to_pylist() if r["grade"] == "FAILED"]
    assert failed["answer"] is None and failed["error"]
