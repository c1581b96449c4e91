"""compare-evals: transitions and win shares of two hand-made runs; Wilson intervals by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mmcurate.evaluation.compare import CompareError, compare_runs, wilson
from tests.releases.cli_helpers import run_cli


@pytest.mark.parametrize(
    "k, n, low, high",
    [
        (41, 60, 0.558, 0.787),  # Kestrel's preference share
        (8, 60, 0.069, 0.242),
        (0, 10, 0.0, 0.278),
        (10, 10, 0.722, 1.0),
        (1, 2, 0.095, 0.905),
    ],
)
def test_wilson_against_hand_computed_values(k, n, low, high):
    interval = wilson(k, n)
    assert interval == pytest.approx((low, high), abs=5e-4)


def test_wilson_equals_the_formula():
    """Pinned to the score interval written out (z = 1.959964), not only to the library."""
    z = 1.959964
    for k, n in ((41, 60), (0, 10), (3, 7), (10, 10)):
        p = k / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        assert wilson(k, n) == pytest.approx((max(0.0, centre - half), min(1.0, centre + half)), abs=1e-7)


def test_wilson_edge_cases():
    assert wilson(0, 0) is None
    with pytest.raises(ValueError):
        wilson(3, 2)


def write_run(
    folder: Path,
    grades: dict[tuple[str, str, int], str],
    release="deflectionbench 1.0.0",
    model="m",
    extra: dict | None = None,
) -> Path:
    folder.mkdir(parents=True)
    rows = [
        {
            "sample_id": sid,
            "source": "infoseek",
            "scenario": scenario,
            "n_negatives": n,
            "model": model,
            "answer": "x",
            "grade": grade,
            **(extra or {}),
        }
        for (sid, scenario, n), grade in grades.items()
    ]
    pq.write_table(pa.Table.from_pylist(rows), folder / "answers.parquet")
    (folder / "table.md").write_text(f"# {model} on {release} (moderate abstention)\n\n## Per scenario\n")
    return folder


C, X, N = "CORRECT", "INCORRECT", "NOT_ATTEMPTED"
A_GRADES = {
    ("s1", "oracle", 0): C,
    ("s2", "oracle", 0): C,
    ("s3", "oracle", 0): X,
    ("s4", "oracle", 0): N,
    ("s1", "realistic", 2): C,
    ("s2", "realistic", 2): X,
    ("s3", "realistic", 2): X,
    ("s4", "realistic", 2): "FAILED",
    ("s5", "oracle", 0): C,
}
B_GRADES = {
    ("s1", "oracle", 0): C,
    ("s2", "oracle", 0): N,
    ("s3", "oracle", 0): C,
    ("s4", "oracle", 0): C,
    ("s1", "realistic", 2): C,
    ("s2", "realistic", 2): C,
    ("s3", "realistic", 2): N,
    ("s4", "realistic", 2): C,
    ("s6", "oracle", 0): C,
}


@pytest.fixture
def runs(tmp_path):
    return write_run(tmp_path / "a", A_GRADES), write_run(tmp_path / "b", B_GRADES, model="m-verify-first")


def test_transitions_and_win_shares(runs):
    result = compare_runs(*runs)
    assert result.release == "deflectionbench 1.0.0"
    assert (result.compared, result.left_out, result.only_in_a, result.only_in_b) == (7, 1, 1, 1)
    assert result.key == ["sample_id", "scenario", "n_negatives"]
    overall = {
        r["transition"]: (r["count"], r["share"]) for r in result.transitions.to_pylist() if r["scenario"] == "all"
    }
    assert overall == {
        "kept correct": (2, 2 / 7),
        "corrected": (3, 3 / 7),
        "broken": (1, 1 / 7),
        "kept wrong": (1, 1 / 7),
    }
    per = {(r["scenario"], r["transition"]): r["count"] for r in result.transitions.to_pylist()}
    assert [per[("oracle", t)] for t in ("kept correct", "corrected", "broken", "kept wrong")] == [1, 2, 1, 0]
    assert [per[("realistic", t)] for t in ("kept correct", "corrected", "broken", "kept wrong")] == [1, 1, 0, 1]
    wins = {r["outcome"]: r for r in result.wins.to_pylist()}
    assert (wins["B better"]["count"], wins["A better"]["count"], wins["tie"]["count"]) == (3, 1, 3)
    assert (wins["B better"]["low"], wins["B better"]["high"]) == pytest.approx(wilson(3, 7))
    assert wins["B preferred among decided"]["n"] == 4 and wins["B preferred among decided"]["share"] == 0.75


def test_cli_prints_the_tables(runs, capsys, monkeypatch):
    code, out, _ = run_cli(capsys, monkeypatch, "compare-evals", str(runs[0]), str(runs[1]))
    assert code == 0
    assert "7 items compared" in out and "| all | corrected | 3 | 42.9 |" in out
    # one unit in the table: shares and their Wilson intervals in % (issue 31 item 22)
    assert "| B better | 3/7 | 42.9 | [15.8, 75.0] |" in out and "95% Wilson (%)" in out


def test_matching_uses_the_columns_both_runs_have(tmp_path):
    grades = {("s1", "oracle", 0): C}
    a = write_run(tmp_path / "a", grades, extra={"abstention": "moderate"})
    b = write_run(tmp_path / "b", grades, extra={"abstention": "severe"})
    with pytest.raises(CompareError, match="share no item .*abstention"):
        compare_runs(a, b)
    c = write_run(tmp_path / "c", grades)  # no abstention column: matched without it
    assert compare_runs(a, c).compared == 1


def test_one_line_errors(tmp_path, runs, capsys, monkeypatch):
    other = write_run(tmp_path / "other", A_GRADES, release="deflectionbench 1.1.0")
    code, _, err = run_cli(capsys, monkeypatch, "compare-evals", str(runs[0]), str(other))
    assert code == 2 and err.count("\n") == 1
    assert "different releases: deflectionbench 1.0.0" in err and "deflectionbench 1.1.0" in err
    disjoint = write_run(tmp_path / "disjoint", {("s9", "oracle", 0): C})
    code, _, err = run_cli(capsys, monkeypatch, "compare-evals", str(runs[0]), str(disjoint))
    assert code == 2 and "share no item" in err and err.count("\n") == 1
    code, _, err = run_cli(capsys, monkeypatch, "compare-evals", str(runs[0]), str(tmp_path))
    assert code == 2 and "is not an evaluation run" in err
    untitled = write_run(tmp_path / "untitled", A_GRADES)
    (untitled / "table.md").write_text("no title\n")
    with pytest.raises(CompareError, match="cannot tell which release"):
        compare_runs(runs[0], untitled)
    failed = write_run(tmp_path / "failed", {k: "FAILED" for k in A_GRADES})
    with pytest.raises(CompareError, match="none is graded in both"):
        compare_runs(runs[0], failed)


def test_pope_runs_are_matched_and_grouped_by_split(tmp_path):
    def pope_run(folder, grades):
        folder.mkdir()
        rows = [{"sample_id": sid, "split": split, "grade": grade} for (sid, split), grade in grades.items()]
        pq.write_table(pa.Table.from_pylist(rows), folder / "answers.parquet")
        (folder / "table.md").write_text("# m on pope 1.0.0 (plain system)\n")
        return folder

    a = pope_run(tmp_path / "a", {("p1", "random"): C, ("p2", "random"): X, ("p3", "adversarial"): X})
    b = pope_run(tmp_path / "b", {("p1", "random"): X, ("p2", "random"): C, ("p3", "adversarial"): C})
    result = compare_runs(a, b)
    assert result.key == ["sample_id", "split"] and result.compared == 3
    per = {(r["scenario"], r["transition"]): r["count"] for r in result.transitions.to_pylist()}
    assert (per[("random", "corrected")], per[("random", "broken")], per[("adversarial", "corrected")]) == (1, 1, 1)
    from mmcurate.evaluation.compare import comparison_markdown

    assert "| Split | Transition | Count | Share (%) |" in comparison_markdown(result)


def test_pope_datasets_are_never_pooled_into_one_split(tmp_path):
    """Kestrel reports COCO, A-OKVQA and GQA each by split: the same probe id and split in two
    datasets are two items, counted in their own rows."""
    from mmcurate.evaluation.compare import comparison_markdown

    def pope_run(folder, grades):
        folder.mkdir()
        rows = [
            {"sample_id": sid, "dataset": dataset, "split": split, "grade": grade}
            for (sid, dataset, split), grade in grades.items()
        ]
        pq.write_table(pa.Table.from_pylist(rows), folder / "answers.parquet")
        (folder / "table.md").write_text("# m on pope 1.0.0 (plain system)\n")
        return folder

    a = pope_run(tmp_path / "a", {("p1", "coco", "random"): X, ("p1", "gqa", "random"): C, ("p2", "gqa", "random"): X})
    b = pope_run(tmp_path / "b", {("p1", "coco", "random"): C, ("p1", "gqa", "random"): X, ("p2", "gqa", "random"): C})
    result = compare_runs(a, b)
    assert result.key == ["sample_id", "dataset", "split"] and result.compared == 3
    per = {(r["scenario"], r["transition"]): r["count"] for r in result.transitions.to_pylist()}
    assert per[("coco / random", "corrected")] == 1 and per[("coco / random", "broken")] == 0
    assert (per[("gqa / random", "corrected")], per[("gqa / random", "broken")]) == (1, 1)
    text = comparison_markdown(result)
    assert "| Dataset / Split | Transition | Count | Share (%) |" in text and "| gqa / random | broken | 1 |" in text


def test_cragmm_runs_compare_on_their_crag_grade(tmp_path):
    """CRAG-MM rows carry ``crag_grade`` (perfect / acceptable correct), not ``grade``; items are
    matched per variant and the transitions counted per variant (issue 42 item 18)."""

    def cragmm_run(folder, grades):
        folder.mkdir()
        rows = [
            {"sample_id": sid, "task": "all", "variant": variant, "crag_grade": grade, "turn_grade": grade}
            for (sid, variant), grade in grades.items()
        ]
        pq.write_table(pa.Table.from_pylist(rows), folder / "answers.parquet")
        (folder / "table.md").write_text("# m on cragmm 1.0.0 (cruise)\n")
        return folder

    a = cragmm_run(
        tmp_path / "a",
        {
            ("t1", "cruise"): "perfect",
            ("t2", "cruise"): "missing",
            ("t1", "no-cov"): "incorrect",
            ("t2", "no-cov"): "timed_out",
        },
    )
    b = cragmm_run(
        tmp_path / "b",
        {
            ("t1", "cruise"): "acceptable",
            ("t2", "cruise"): "perfect",
            ("t1", "no-cov"): "perfect",
            ("t2", "no-cov"): "perfect",
        },
    )
    result = compare_runs(a, b)
    assert result.key == ["sample_id", "task", "variant"] and (result.compared, result.left_out) == (3, 1)
    per = {(r["scenario"], r["transition"]): r["count"] for r in result.transitions.to_pylist()}
    assert (per[("cruise", "kept correct")], per[("cruise", "corrected")], per[("no-cov", "corrected")]) == (1, 1, 1)
    from mmcurate.evaluation.compare import comparison_markdown

    assert "| Variant | Transition | Count | Share (%) |" in comparison_markdown(result)
    plain = write_run(tmp_path / "plain", {("t1", "oracle", 0): C}, release="cragmm 1.0.0")
    with pytest.raises(CompareError, match="graded differently: crag_grade"):
        compare_runs(a, plain)
