"""Cohen's kappa on a hand-computed table, and the judge-agreement command."""

from __future__ import annotations

import math

import polars as pl
import pytest
from typer.testing import CliRunner

from mmcurate.cli.app import app
from mmcurate.review.agreement import cohen_kappa, pearson

# 50 items. A says C/I: rows; B says C/I: columns.  [[20, 5], [10, 15]]
# p_o = 35/50 = 0.7; p_e = 0.5*0.6 + 0.5*0.4 = 0.5; kappa = (0.7-0.5)/(1-0.5) = 0.4
A = ["C"] * 25 + ["I"] * 25
B = ["C"] * 20 + ["I"] * 5 + ["C"] * 10 + ["I"] * 15


def test_kappa_known_table():
    assert cohen_kappa(A, B) == pytest.approx(0.4)
    assert cohen_kappa(A, A) == pytest.approx(1.0)
    assert math.isnan(cohen_kappa(["C", "C"], ["C", "C"]))


def test_judge_agreement_command(tmp_path):
    keys = [f"k{i}" for i in range(50)]
    names = {"C": "CORRECT", "I": "INCORRECT"}
    pl.DataFrame(
        {"key": keys + ["only_a", "err"], "grade": [names[g] for g in A] + ["CORRECT", "JUDGE_ERROR"]}
    ).write_parquet(tmp_path / "a.parquet")
    pl.DataFrame({"key": keys + ["err"], "grade": [names[g] for g in B] + ["CORRECT"]}).write_parquet(
        tmp_path / "b.parquet"
    )
    result = CliRunner().invoke(app, ["judge-agreement", str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")])
    assert result.exit_code == 0, result.output
    assert "compared: 50" in result.output
    assert "raw agreement: 0.7000" in result.output
    assert "cohen kappa: 0.4000" in result.output
    assert "1 with JUDGE_ERROR, 1 only in a.parquet, 0 only in b.parquet" in result.output


def test_pearson_known_values():
    # x = 1..5, y = 2 4 5 4 5: sum dx dy = 6, sum dx^2 = 10, sum dy^2 = 6 -> r = 6 / sqrt(60)
    assert pearson([1, 2, 3, 4, 5], [2, 4, 5, 4, 5]) == pytest.approx(6 / math.sqrt(60))
    assert pearson([1, 2], [2, 1]) == pytest.approx(-1.0)
    assert math.isnan(pearson([1, 2, 3], [4, 4, 4]))
    with pytest.raises(ValueError):
        pearson([1.0], [2.0])
