"""``mmcurate plan`` covers ReflectV (issue 22, item 11): requests per step and model from the
paper's funnel (~35k dialogues -> ~24k verified chains), ingested FIRE dialogues cost no
dialogue call, a release's measured rates, and a config with nothing to plan is one line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mmcurate.core.config import load_config
from mmcurate.planning.bill import reflectv_bill
from mmcurate.planning.inputs import PlanInput
from mmcurate.planning.rates import paper_reflectv, release_reflectv
from mmcurate.planning.reflectv.curation import plan_reflectv
from tests.releases.cli_helpers import run_cli

PAPER = Path(__file__).resolve().parents[2] / "configs" / "reflectv-paper.yaml"


def requests(plan, step: str, model: str) -> float:
    [row] = [r for r in plan.rows if r.step == step and r.model == model]
    return row.requests


def test_paper_config_at_the_papers_scale():
    plan = reflectv_bill(load_config(PAPER), 35_000)
    each = math.sqrt(24 / 35)
    assert dict(plan.funnel)["verified chains"] == pytest.approx(24_000)
    assert dict(plan.funnel)["after the trajectory filter"] == pytest.approx(35_000 * each)
    # every dialogue to max_turns (3): one student and one teacher call per turn
    assert requests(plan, "dialogue", "gpt-4o-student") == requests(plan, "dialogue", "gpt-4o-teacher") == 105_000
    assert requests(plan, "trajectory", "gpt-4o-judge") == 35_000  # the LLM judge, at most once per dialogue
    reflective = 35_000 * each * 2  # two reflective turns per kept dialogue
    assert requests(plan, "grounding", "molmo-7b") == pytest.approx(reflective)
    assert requests(plan, "visual", "qwen2.5-vl-7b") == pytest.approx(reflective)
    # General QA stand-ins: two keyword calls; the rewrite comes after the caption, in the grounding stage (Figure 12)
    assert requests(plan, "reflection", "qwen2.5-7b") == pytest.approx(2 * reflective)
    assert [r.requests for r in plan.rows if r.step == "grounding" and r.model == "qwen2.5-7b"] == pytest.approx(
        [reflective]
    )
    assert all(r.prompt_tokens > 0 and r.completion_tokens > 0 for r in plan.rows)
    assert "max_turns, an upper bound" in plan.render() and "35,000 dialogues" in plan.rates_from


def test_ingested_dialogues_cost_no_dialogue_call():
    settings = load_config(PAPER)
    row = {
        "sample_id": "f",
        "question": "What is it?",
        "answers": ["a pagoda"],
        "images": ["ab" * 32],
        "meta": json.dumps({"domain": "Document", "dialogue": [{"answer": "x", "score": 10, "feedback": ""}]}),
    }
    built = {**row, "sample_id": "b", "meta": json.dumps({"domain": "Document"})}
    plan = plan_reflectv(settings, PlanInput(100, [row, built], "test"), paper_reflectv())
    assert requests(plan, "dialogue", "gpt-4o-student") == 50 * 3  # half the samples come with their dialogue
    reflective = 100 * math.sqrt(24 / 35) * 2
    # dense-perception domains: one subject-phrase call per reflective turn, as many as the rewrites
    assert [
        r.requests for r in plan.rows if r.step in ("reflection", "grounding") and r.model == "qwen2.5-7b"
    ] == pytest.approx([reflective, reflective])


def test_rates_measured_by_a_release(tmp_path):
    release = tmp_path / "reflectv" / "1.0.0"
    (release / "data").mkdir(parents=True)
    dialogues = pa.Table.from_pylist(
        [
            {"origin": "built", "dialogue": [{"answer": "a"}, {"answer": "b"}]},
            {"origin": "built", "dialogue": [{"answer": "a"}]},
            {"origin": "ingested", "dialogue": [{"answer": "a"}] * 5},
        ]
    )
    pq.write_table(dialogues, release / "data" / "dialogues-00000-of-00001.parquet")
    funnel = [
        {"stage": s, "remaining": n}
        for s, n in (("original", 20), ("response", 12), ("gt", 10), ("chains", 4), ("released", 5))
    ]
    (release / "manifest.json").write_text(
        json.dumps(
            {
                "benchmark": "reflectv",
                "version": "1.0.0",
                "files": {},
                "counts": {},
                "statistics": {"funnel": funnel},
                "shards": {"dialogues": ["data/dialogues-00000-of-00001.parquet"]},
            }
        )
    )
    rates = release_reflectv(release)
    assert (rates.trajectory, rates.visual, rates.turns) == (0.5, 0.4, 1.5)  # turns: built dialogues only


def test_a_config_with_nothing_to_plan_is_one_line(capsys, monkeypatch, tmp_path):
    config = tmp_path / "empty.yaml"
    config.write_text("workdir: work\nmodels: {}\n")
    code, _, err = run_cli(capsys, monkeypatch, "plan", str(config))
    assert code == 2 and err.count("\n") == 1
    assert "has no benchmark section (deflectionbench, reflvqa, reflectv, cragmm, pope): nothing to plan" in err
