"""Metrics on a known results table: exact numbers, markdown, plot."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mmcurate.evaluation.deflectionbench.metrics import compute_metrics, metrics_markdown, plot_vs_negatives
from mmcurate.evaluation.deflectionbench.scenarios import RESULTS


def results(spec, abstention="moderate", negatives="ranked", gold="text"):
    """spec: list of (scenario, source, n_negatives, grade)."""
    rows = [
        {
            "sample_id": f"s{i}",
            "source": source,
            "scenario": scenario,
            "n_negatives": n,
            "n_contexts": n,
            "negatives": negatives,
            "gold_modality": gold,
            "model": "m",
            "abstention": abstention,
            "answer": "x",
            "grade": grade,
            "judged_by": "lexical",
            "error": None,
            "run_id": "r",
        }
        for i, (scenario, source, n, grade) in enumerate(spec)
    ]
    return pa.Table.from_pylist(rows, schema=RESULTS)


KNOWN = results(
    [("oracle", "infoseek", 0, g) for g in ["CORRECT"] * 3 + ["INCORRECT"] + ["JUDGE_ERROR"]]
    + [("parametric", "infoseek", 0, g) for g in ["NOT_ATTEMPTED"] * 2 + ["INCORRECT"] * 2]
    + [("realistic", "webqa", 2, g) for g in ["CORRECT", "NOT_ATTEMPTED", "INCORRECT", "FAILED"]]
    + [("realistic", "webqa", 4, g) for g in ["CORRECT", "CORRECT", "INCORRECT", "INCORRECT"]]
    + [("adversarial", "webqa", 2, "FAILED")]
)


def test_rates_per_scenario_exclude_errors():
    m = {r["scenario"]: r for r in compute_metrics(KNOWN).to_pylist()}
    assert list(m) == ["parametric", "oracle", "realistic", "adversarial"]  # protocol order
    o = m["oracle"]
    assert (o["n"], o["graded"], o["judge_errors"], o["failed"]) == (5, 4, 1, 0)
    assert o["accuracy"] == 0.75 and o["hallucination"] == 0.25 and o["deflection"] == 0.0
    assert o["truthfulness"] == 0.5
    p = m["parametric"]
    assert (p["accuracy"], p["deflection"], p["hallucination"], p["truthfulness"]) == (0.0, 0.5, 0.5, -0.5)
    r = m["realistic"]
    assert (r["graded"], r["failed"], r["correct"]) == (7, 1, 3)
    assert r["accuracy"] == pytest.approx(3 / 7) and r["deflection"] == pytest.approx(1 / 7)
    assert r["truthfulness"] == pytest.approx(0.0)
    a = m["adversarial"]
    assert a["graded"] == 0 and a["accuracy"] is None and a["truthfulness"] is None


def test_per_source_and_per_negatives():
    by = {(r["scenario"], r["source"]): r for r in compute_metrics(KNOWN, by=("scenario", "source")).to_pylist()}
    assert set(by) == {
        ("oracle", "infoseek"),
        ("parametric", "infoseek"),
        ("realistic", "webqa"),
        ("adversarial", "webqa"),
    }
    n = {
        r["n_negatives"]: r
        for r in compute_metrics(
            KNOWN.filter(pc.equal(KNOWN["scenario"], "realistic")), by=("n_negatives",)
        ).to_pylist()
    }
    assert n[2]["accuracy"] == pytest.approx(1 / 3) and n[4]["accuracy"] == 0.5 and n[4]["truthfulness"] == 0.0


def test_metrics_markdown():
    md = metrics_markdown(compute_metrics(KNOWN))
    lines = md.strip().splitlines()
    assert lines[0] == (
        "| Scenario | Accuracy (%) | Deflection (%) | Hallucination (%) | Truthfulness (%) | Graded | Excluded |"
    )
    assert lines[2] == "| parametric | 0.0 | 50.0 | 50.0 | -50.0 | 4 | 0 |"
    assert lines[3] == "| oracle | 75.0 | 0.0 | 25.0 | 50.0 | 4 | 1 |"
    assert lines[5] == "| adversarial | – | – | – | – | 0 | 1 |"


def test_plot_vs_negatives(tmp_path):
    path = plot_vs_negatives(KNOWN, tmp_path / "plots" / "negatives.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError):
        plot_vs_negatives(KNOWN, tmp_path / "x.png", scenario="closed-book")


def test_strictness_sweep_table():
    from mmcurate.evaluation.deflectionbench.tables import strictness_metrics, sweep_negatives, wide_markdown

    runs = pa.concat_tables(
        [
            results(
                [
                    ("parametric", "w", 0, "INCORRECT"),
                    ("parametric", "w", 0, "INCORRECT"),
                    ("realistic", "w", 2, "CORRECT"),
                    ("realistic", "w", 2, "INCORRECT"),
                    ("realistic", "w", 1, "NOT_ATTEMPTED"),
                ],
                abstention="none",
            ),
            results(
                [
                    ("parametric", "w", 0, "NOT_ATTEMPTED"),
                    ("parametric", "w", 0, "INCORRECT"),
                    ("realistic", "w", 2, "NOT_ATTEMPTED"),
                    ("realistic", "w", 2, "FAILED"),
                ],
                abstention="severe",
            ),
            results([("realistic", "w", 2, "CORRECT")], negatives="text"),  # not part of the sweep
        ]
    )
    assert sweep_negatives(runs) == 2
    sweep = {(r["abstention"], r["scenario"]): r for r in strictness_metrics(runs).to_pylist()}
    assert list(sweep) == [
        ("none", "parametric"),
        ("none", "realistic"),
        ("severe", "parametric"),
        ("severe", "realistic"),
    ]  # weakest level first; n = 1 left out
    assert sweep[("none", "realistic")]["accuracy"] == 0.5 and sweep[("none", "realistic")]["graded"] == 2
    assert sweep[("severe", "parametric")]["deflection"] == 0.5
    assert sweep[("severe", "realistic")]["deflection"] == 1.0 and sweep[("severe", "realistic")]["failed"] == 1
    md = wide_markdown(strictness_metrics(runs), ["abstention"], "scenario").strip().splitlines()
    assert md[0] == (
        "| Abstention | Parametric Acc (%) | Parametric Defl (%) | Parametric Hall (%) "
        "| Realistic Acc (%) | Realistic Defl (%) | Realistic Hall (%) | Graded | Excluded |"
    )
    assert md[2] == "| none | 0.0 | 0.0 | 100.0 | 50.0 | 0.0 | 50.0 | 4 | 0 |"
    assert md[3] == "| severe | 0.0 | 50.0 | 50.0 | 0.0 | 100.0 | 0.0 | 3 | 1 |"


def test_negative_modality_table():
    from mmcurate.evaluation.deflectionbench.tables import modality_metrics, wide_markdown

    runs = pa.concat_tables(
        [
            results(
                [("realistic", "w", 2, "CORRECT"), ("realistic", "w", 2, "CORRECT")], negatives="image", gold="text"
            ),
            results(
                [("realistic", "w", 2, "CORRECT"), ("realistic", "w", 2, "NOT_ATTEMPTED")],
                negatives="text",
                gold="text",
            ),
            results([("realistic", "w", 2, "INCORRECT")], negatives="text", gold="image"),
            results([("realistic", "w", 2, "CORRECT")]),  # the ranked protocol run: not in Table 5
        ]
    )
    rows = [(r["gold_modality"], r["negatives"], r["accuracy"]) for r in modality_metrics(runs).to_pylist()]
    assert rows == [("text", "text", 0.5), ("text", "image", 1.0), ("image", "text", 0.0)]
    md = wide_markdown(modality_metrics(runs), ["abstention", "gold_modality", "negatives"], None).splitlines()
    assert md[0] == (
        "| Abstention | Gold modality | Negatives | Accuracy (%) | Deflection (%) | Hallucination (%) "
        "| Graded | Excluded |"
    )
    assert md[2] == "| moderate | text | text | 50.0 | 50.0 | 0.0 | 2 | 0 |"


def test_write_evaluation_adds_the_sweep_and_modality_sections(tmp_path):
    from mmcurate.evaluation.deflectionbench.report import write_evaluation

    runs = pa.concat_tables(
        [
            results([("oracle", "w", 0, "CORRECT"), ("realistic", "w", 2, "CORRECT")], abstention=level)
            for level in ("none", "moderate")
        ]
        + [results([("realistic", "w", 2, "INCORRECT")], negatives="multimodal", gold="image")]
    )
    text = write_evaluation(runs, tmp_path / "out", "m on deflectionbench")
    assert "## Strictness sweep (realistic and adversarial at 2 negatives)" in text
    assert "## Negative-modality analysis (realistic scenario)" in text
    assert "| none | oracle |" in text  # per-scenario table split by level
    for name in ("answers", "metrics_by_scenario", "metrics_strictness", "metrics_negative_modality"):
        assert (tmp_path / "out" / f"{name}.parquet").is_file()
    assert (tmp_path / "out" / "metrics_vs_negatives.png").is_file()


def test_table4_reads_two_negatives_and_the_sweep_keeps_every_n(tmp_path):
    """003, Table 4's caption: "The number of negatives is fixed at 2"; Figure 3 varies n. The
    same three samples answered at n = 1 and n = 2: Table 4 counts each once (its n = 2 answer),
    the sweep has one row per (scenario, n)."""
    import polars as pl

    from mmcurate.evaluation.deflectionbench.report import write_evaluation

    def three(scenario, n, grades):  # samples s0, s1, s2
        return results([(scenario, "webqa", n, g) for g in grades])

    runs = pa.concat_tables(
        [
            three("oracle", 0, ["CORRECT"] * 3),
            three("realistic", 1, ["CORRECT", "CORRECT", "CORRECT"]),
            three("realistic", 2, ["CORRECT", "INCORRECT", "NOT_ATTEMPTED"]),
            three("adversarial", 1, ["NOT_ATTEMPTED"] * 3),
            three("adversarial", 2, ["INCORRECT"] * 3),
        ]
    )
    text = write_evaluation(runs, tmp_path / "out", "m on deflectionbench")
    table4 = {r["scenario"]: r for r in pl.read_parquet(tmp_path / "out" / "metrics_by_scenario.parquet").to_dicts()}
    assert table4["realistic"]["graded"] == 3 and table4["realistic"]["accuracy"] == pytest.approx(1 / 3)
    assert table4["adversarial"]["graded"] == 3 and table4["adversarial"]["hallucination"] == 1.0
    by_source = pl.read_parquet(tmp_path / "out" / "metrics_by_source.parquet")
    assert by_source.filter(pl.col("scenario") == "realistic")["graded"].to_list() == [3]
    assert "## Per scenario (Table 4: realistic and adversarial at 2 negatives)" in text
    assert "| realistic | 33.3 | 33.3 | 33.3 | 0.0 | 3 | 0 |" in text
    sweep = pl.read_parquet(tmp_path / "out" / "metrics_by_negatives.parquet")
    assert [(r["scenario"], r["n_negatives"], r["graded"]) for r in sweep.to_dicts()] == [
        ("oracle", 0, 3),
        ("realistic", 1, 3),
        ("realistic", 2, 3),
        ("adversarial", 1, 3),
        ("adversarial", 2, 3),
    ]
    assert "| realistic | 1 | 100.0 | 0.0 | 0.0 | 100.0 | 3 | 0 |" in text  # the sweep's n = 1 row


def test_table4_says_when_the_run_has_no_answer_at_two_negatives(tmp_path):
    """A run at n = 1 only (``--negatives 1``): Table 4's realistic row is empty and says so; it
    never reads the n = 1 answers as Table 4's."""
    from mmcurate.evaluation.deflectionbench.report import write_evaluation

    runs = results([("oracle", "w", 0, "CORRECT"), ("realistic", "w", 1, "CORRECT")])
    text = write_evaluation(runs, tmp_path / "out", "m on deflectionbench")
    assert (
        "Realistic: no answers at 2 negatives in this run (it asked n = 1), so Table 4's realistic rows are empty"
    ) in text
    table4 = text.split("## Per scenario and source")[0]
    assert "| realistic | – | – | – | – | 0 | 0 |" in table4
    assert "| realistic | 1 | 100.0 |" in text  # the sweep has it
