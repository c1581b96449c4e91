"""DeflectionBench's two rules that read the gating models' grades (Stage I ``gating.rule``,
Stage III ``gating.oracle_rule``) are one typed object each, asked by every stage, plan and
card: no other module spells their meaning."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from mmcurate.benchmarks.deflectionbench import RULES, Rule, answer_rule
from mmcurate.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
HOME = REPO / "benchmarks" / "deflectionbench.py"


def test_the_config_offers_exactly_the_rules_there_are():
    assert set(get_args(Rule)) == set(RULES)


def test_which_grades_count_as_answering():
    grades = ("CORRECT", "INCORRECT", "NOT_ATTEMPTED", "JUDGE_ERROR", "error")
    assert [g for g in grades if RULES["all_incorrect"].answered(g)] == ["CORRECT", "NOT_ATTEMPTED"]  # eq. 4
    assert [g for g in grades if RULES["none_correct"].answered(g)] == ["CORRECT"]
    assert RULES["all_incorrect"].gate_drop.format(model="m1") == "m1 was not judged INCORRECT"
    with pytest.raises(ConfigError, match="^unknown oracle rule 'most_correct'; known: all_incorrect, none_correct$"):
        answer_rule("most_correct", "oracle")


@pytest.mark.parametrize("name", list(RULES))
def test_a_rule_means_what_it_says_in_one_place(name):
    rule = RULES[name]
    texts = [rule.stage_i, rule.stage_iii, rule.gold_drop]
    library = [
        p for p in REPO.glob("*/**/*.py") if p.parts[len(REPO.parts)] not in ("tests", "bench", ".venv", "build")
    ]
    found = [f"{p.relative_to(REPO)}: {text}" for p in library if p != HOME for text in texts if text in p.read_text()]
    assert found == []
