"""The four evaluation scenarios: which evidence is shown, deterministic order, abstention prompts."""

from __future__ import annotations

import pytest

from mmcurate.benchmarks.deflectionbench import MAX_NEGATIVES
from mmcurate.core.errors import MmcurateError
from mmcurate.evaluation.deflectionbench.scenarios import (
    RESULTS,
    evaluate,
    gold_modality,
    modality_eligible,
    plan_jobs,
    scenario_contexts,
    scenario_request,
)
from mmcurate.gating import prompts
from mmcurate.models.requests import text_of


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
    for bad in (0, MAX_NEGATIVES + 1):  # one maximum, Stage II's cap (issue 43 item 5)
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
    assert (
        scenario_request(row, "realistic", 6, seed=7).messages == scenario_request(row, "realistic", 6, seed=7).messages
    )


def test_abstention_levels_follow_the_papers_prompts(row):
    """Seed 003, Appendix I: one system prompt for every level (Figure 6: the model may be given
    text, images or both); the level ends the user turn and asks for the answer (Figures 7-9);
    severe demands the exact refusal "I cannot answer this question."."""
    templates = {level: prompts.eval_template(level) for level in prompts.STRICTNESS_LEVELS}
    assert len({t.system for t in templates.values()}) == 1
    assert all(word in templates["none"].system for word in ("text", "images", "retriev"))
    assert len({t.instruction for t in templates.values()}) == 4 and len({t.id for t in templates.values()}) == 4
    assert all(t.instruction.endswith("Answer:") for t in templates.values())
    assert templates["none"].instruction == "Answer:"  # the sweep's baseline: no word about abstaining
    assert prompts.REFUSAL == "I cannot answer this question."
    assert prompts.REFUSAL in templates["severe"].instruction
    assert all(prompts.REFUSAL not in templates[level].instruction for level in ("none", "soft", "moderate"))
    assert {level: t.id for level, t in templates.items()} == {level: f"eval.{level}.v2" for level in templates}
    user = scenario_request(row, "oracle", abstention="severe").messages[1]["content"]
    assert user[-2]["text"].startswith("Question: ") and user[-1]["text"] == templates["severe"].instruction
    with pytest.raises(MmcurateError, match="known: none, soft, moderate, severe"):
        prompts.eval_template("extreme")


def test_evaluate_grades_every_answer(world, make, row):
    other = make.sample("t", "Q-T?", ["Rome"], source="webqa", negatives=[make.text("m0", "NEG-x")])
    # answers with gold evidence, abstains without it; fails on Q-T in the adversarial setting
    m = world.add(
        "m",
        [
            {"when_all": ["GOLD-1"], "answer": "Paris"},
            {"when_all": ["GOLD-t"], "answer": "Rome"},
            {"when_all": ["Q-T", "NEG-x"], "when_none": ["GOLD-t"], "answer": "FAIL-SENTINEL"},
            {"when_all": ["NEG-"], "answer": "Berlin"},
        ],
        default="I don't know",
    )
    out = evaluate(
        make.table([row, other]),
        world.pool,
        world.judge,
        m,
        ["parametric", "oracle", "realistic", "adversarial"],
        [1, 2],
        "severe",
        seed=0,
        run_id="e",
    )
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


@pytest.fixture
def mixed(make):
    """Text gold; negatives ranked text, image, text, image, text."""
    negatives = [
        make.text("t0", "NEG-T0"),
        make.image("i0", "e0" * 32),
        make.text("t1", "NEG-T1"),
        make.image("i1", "e1" * 32),
        make.text("t2", "NEG-T2"),
    ]
    return make.sample("mx", "Q-MX?", ["Oslo"], gold=[make.text("g", "GOLD-MX Oslo")], negatives=negatives)


def test_negative_modality_settings(mixed, make):
    assert gold_modality(mixed) == "text" and modality_eligible(mixed)
    shown = lambda mode, n=2: sorted(ids(scenario_contexts(mixed, "realistic", n, 0, mode)))  # noqa: E731
    assert shown("ranked") == ["g", "i0", "t0"]
    assert shown("text") == ["g", "t0", "t1"]
    assert shown("image") == ["g", "i0", "i1"]
    assert shown("multimodal") == ["g", "i0", "t0"]
    assert shown("multimodal", 3) == ["g", "i0", "t0", "t1"]  # ceil(n/2) text, floor(n/2) image
    with pytest.raises(MmcurateError):
        scenario_contexts(mixed, "adversarial", 2, 0, "text")  # the analysis is realistic only
    one_image = make.sample(
        "x", "Q?", ["a"], negatives=[make.text("t", "x"), make.text("u", "y"), make.image("i", "e0" * 32)]
    )
    assert not modality_eligible(one_image)  # needs 2 of each modality
    both = make.sample("y", "Q?", ["a"], gold=[make.text("g", "x"), make.image("h", "e0" * 32)])
    assert gold_modality(both) == "mixed" and gold_modality(make.sample("z", "Q?", ["a"], gold=[])) == "none"


def test_plan_validates_before_any_call():
    jobs = plan_jobs(["oracle", "realistic"], [1, 2], ["none", "severe"], modality_analysis=True)
    assert [(j.abstention, j.scenario, j.n, j.negatives) for j in jobs] == [
        ("none", "oracle", 0, "ranked"),
        ("none", "realistic", 1, "ranked"),
        ("none", "realistic", 2, "ranked"),
        ("none", "realistic", 2, "text"),
        ("none", "realistic", 2, "image"),
        ("none", "realistic", 2, "multimodal"),
        ("severe", "oracle", 0, "ranked"),
        ("severe", "realistic", 1, "ranked"),
        ("severe", "realistic", 2, "ranked"),
        ("severe", "realistic", 2, "text"),
        ("severe", "realistic", 2, "image"),
        ("severe", "realistic", 2, "multimodal"),
    ]
    for bad in (
        {"scenarios": ["closed-book"]},
        {"n_negatives": [0]},
        {"abstentions": ["extreme"]},
        {"abstentions": []},
        {"n_negatives": []},
    ):
        args = {"scenarios": ["oracle"], "n_negatives": [2], "abstentions": ["moderate"], **bad}
        with pytest.raises(MmcurateError):
            plan_jobs(**args)


def test_sweep_and_modality_runs_are_kept_apart(world, make, row, mixed):
    m = world.add(
        "m",
        [
            {"when_all": ["GOLD-MX"], "when_none": ["NEG-T"], "answer": "Oslo"},
            {"when_all": ["GOLD-1"], "answer": "Paris"},
        ],
        default="Bergen",
    )
    out = evaluate(
        make.table([row, mixed]),
        world.pool,
        world.judge,
        m,
        ["oracle", "realistic"],
        [2],
        ["none", "moderate"],
        seed=0,
        run_id="e",
        modality_analysis=True,
    )
    keys = [(r["sample_id"], r["scenario"], r["n_negatives"], r["negatives"], r["abstention"]) for r in out.to_pylist()]
    assert len(keys) == len(set(keys))  # one row per item key
    modality = [r for r in out.to_pylist() if r["negatives"] != "ranked"]
    assert {r["sample_id"] for r in modality} == {mixed["sample_id"]}  # row's gold is mixed text+image: sits out
    grades = {(r["negatives"], r["abstention"]): r["grade"] for r in modality}
    assert grades[("image", "none")] == "CORRECT" and grades[("text", "none")] == "INCORRECT"
    assert grades[("multimodal", "moderate")] == "INCORRECT"  # a text negative is shown
    assert {r["gold_modality"] for r in modality} == {"text"}
    sent = [key for _, key in world.sent[m]]
    assert len(sent) == 2 * 2 * 2 + 2 * 3  # (oracle + realistic) x 2 samples x 2 levels, + Table 5 x 2 levels
    endings = {msgs[1]["content"][-1]["text"] for msgs in world.pool.messages[m]}
    assert endings == {prompts.eval_template(level).instruction for level in ("none", "moderate")}
