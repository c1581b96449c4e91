"""``mmcurate evaluate --system verify-first`` end to end on the shared scripted release: the
gate trace in answers.parquet, abstentions graded as the judge grades "I don't know", the
CRAG columns, and ``compare-evals`` of plain vs verify-first with the transitions the
script decides.

The script (the dry run's reader, with gate rules first): the router says every question
needs outside knowledge and none is time-sensitive; the consistency judge says yes and the
verifier 0.95, except for two questions: one whose verifier says 0.5 (below 0.9: abstain)
and one whose consistency reply is unreadable twice (abstain, gate_error). So in the oracle
scenario (the reader answers every question from its gold) verify-first keeps n - 2 correct
answers and breaks 2; in the parametric scenario it is never confident enough (0.95 < 1.0
without context; the two questions above abstain for their own reasons) and abstains on
every question, which the plain reader gets wrong.
"""

from __future__ import annotations

import json

import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from mmcurate.evaluation.verify_first import IDK
from mmcurate.judging.grades import Grade, JudgeItem
from mmcurate.judging.simpleqa import LexicalJudge
from mmcurate.releases.reader import open_release
from tests.flows import flowkit

pytestmark = pytest.mark.slow
SIMPLEQA_TO_CRAG = {"CORRECT": "perfect", "NOT_ATTEMPTED": "missing", "INCORRECT": "incorrect"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, fixtures_root, prefect_harness):
    from mmcurate.cli import app

    home, release = flowkit.baseline(tmp_path_factory, fixtures_root)
    questions = sorted(open_release(release).table("test").column("question").to_pylist())
    assert len(questions) >= 3
    low, unreadable = questions[0], questions[1]
    here = tmp_path_factory.mktemp("verify-first")
    gate = [
        {"when_all": ["OUTSIDE KNOWLEDGE:"], "answer": "OUTSIDE KNOWLEDGE: yes\nTIME-SENSITIVE: no"},
        {"when_all": [f"Question: {unreadable.strip()}", "Proposed answer 1"], "answer": "maybe"},
        {"when_all": ["Proposed answer 1"], "answer": "yes"},
        {"when_all": [f"Question: {low.strip()}", "Proposed answer:"], "answer": "CONFIDENCE: 0.5\nREASONING: unsure"},
        {"when_all": ["Proposed answer:"], "answer": "CONFIDENCE: 0.95\nREASONING: the evidence says so"},
    ]
    script = here / "gated-reader.jsonl"
    script.write_text(
        "".join(json.dumps(rule) + "\n" for rule in gate) + (flowkit.DRYRUN / "vlm-reader.jsonl").read_text()
    )
    spec = here / "gated-reader.yaml"
    spec.write_text(yaml.safe_dump({**flowkit.READER, "name": "gated-reader", "script": str(script)}))
    outs = {}
    for system in ("plain", "verify-first"):
        outs[system] = here / system
        result = CliRunner().invoke(
            app,
            [
                "evaluate",
                str(release),
                "--model",
                str(spec),
                "--config",
                str(home / "config.yaml"),
                "--scenario",
                "oracle",
                "--scenario",
                "parametric",
                "--system",
                system,
                "--out",
                str(outs[system]),
            ],
        )
        assert result.exit_code == 0, result.output
    return outs, len(questions), low, unreadable


def test_verify_first_answers_carry_the_gate_trace(runs):
    outs, n, low, unreadable = runs
    answers = pl.read_parquet(outs["verify-first"] / "answers.parquet")
    assert answers.height == 2 * n and set(answers["system"].to_list()) == {"verify-first"}
    assert answers["needs_outside_knowledge"].to_list() == [True] * 2 * n
    assert answers["time_sensitive"].to_list() == [False] * 2 * n
    oracle = answers.filter(pl.col("scenario") == "oracle")
    low_row = oracle.filter(pl.col("answer") == IDK).join(pl.DataFrame({"confidence": [0.5]}), on="confidence")
    assert low_row.height == 1 and low_row["gate_reason"][0] == "confidence 0.5 below 0.9 (with context)"
    errs = oracle.filter(pl.col("gate_error").is_not_null())
    assert errs.height == 1 and errs["gate_error"][0].startswith("consistency:")
    assert errs["consistent"][0] is None and errs["confidence"][0] is None
    assert oracle.filter(pl.col("abstained") == False)["grade"].to_list() == ["CORRECT"] * (n - 2)  # noqa: E712
    parametric = answers.filter(pl.col("scenario") == "parametric")
    assert parametric["abstained"].to_list() == [True] * n
    assert sorted(parametric["gate_reason"].to_list()) == sorted(
        ["confidence 0.5 below 1 (without context)", "the consistency judge could not be read"]
        + ["confidence 0.95 below 1 (without context)"] * (n - 2)
    )
    trace = json.loads(parametric["trace"][0])
    assert trace["checks"] == ["router", "answers", "consistency", "chain_of_verification"]
    # an abstention is graded as the judge grades "I don't know"
    [idk] = LexicalJudge().grade([JudgeItem("k", "Who?", ["Eiffel"], IDK)], "evaluate")
    assert idk.grade == Grade.NOT_ATTEMPTED
    assert set(answers.filter(pl.col("abstained"))["grade"].to_list()) == {"NOT_ATTEMPTED"}
    plain = pl.read_parquet(outs["plain"] / "answers.parquet")
    assert plain.columns == answers.columns and set(plain["system"].to_list()) == {"plain"}
    assert plain["trace"].null_count() == plain.height
    assert "verify-first system)" in (outs["verify-first"] / "table.md").read_text().splitlines()[0]


def test_crag_scoring_beside_the_metrics(runs):
    outs, n, _, _ = runs
    for out in outs.values():
        answers = pl.read_parquet(out / "answers.parquet")
        crag = pl.read_parquet(out / "crag.parquet")
        key = ["sample_id", "scenario", "n_negatives", "negatives", "abstention"]
        both = answers.join(crag, on=key)
        assert both.height == answers.height
        # the lexical judge's grades mapped; short answers are judged whole
        assert both["crag_grade"].to_list() == [SIMPLEQA_TO_CRAG[g] for g in both["grade"].to_list()]
        assert not any(both["truncated"].to_list())
        metrics = pl.read_parquet(out / "crag_metrics.parquet")
        assert sorted(metrics["scenario"].to_list()) == ["oracle", "parametric"]
        table = (out / "table.md").read_text()
        assert "## CRAG scoring (per scenario, realistic and adversarial at 2 negatives)" in table
        assert "CRAG judge: lexical" in table
        assert "Stand-in: the SimpleQA grades are mapped" in table and "first 75 tokens (wordpiece:" in table
    metrics = pl.read_parquet(outs["verify-first"] / "crag_metrics.parquet").sort("scenario")
    assert metrics.select("n_perfect", "n_missing", "n_incorrect").rows() == [(n - 2, 2, 0), (0, n, 0)]
    assert metrics["truthfulness"].to_list() == [pytest.approx((n - 2) / n), 0.0]


def test_compare_plain_with_verify_first(runs):
    from mmcurate.cli import app

    outs, n, _, _ = runs
    result = CliRunner().invoke(app, ["compare-evals", str(outs["plain"]), str(outs["verify-first"])])
    assert result.exit_code == 0, result.output
    text = result.output
    assert f"{2 * n} items compared" in text
    for scenario, transition, count in [
        ("all", "kept correct", n - 2),
        ("all", "broken", 2),
        ("all", "kept wrong", n),
        ("all", "corrected", 0),
        ("oracle", "kept correct", n - 2),
        ("oracle", "broken", 2),
        ("parametric", "kept wrong", n),
    ]:
        assert f"| {scenario} | {transition} | {count} |" in text, (scenario, transition, text)


def test_the_demos_stand_ins_keep_some_answers_and_abstain_on_others(
    tmp_path_factory, fixtures_root, capsys, monkeypatch
):
    """Issue 37 on the demo's set-up: a scripted router (configs/dryrun/verify-router.jsonl) and the
    lexical verifier around an answering model. The reader answers every oracle question from its
    gold evidence; without evidence it knows half of them. Consistent answers that the evidence
    holds are kept; the others are abstained on for the consistency judge's reason, and
    compare-evals shows both kinds."""
    from mmcurate.cli import app
    from tests.releases.cli_helpers import run_cli

    home, release = flowkit.baseline(tmp_path_factory, fixtures_root)
    rows = open_release(release).table("test").select(["question", "answers"]).to_pylist()
    here = tmp_path_factory.mktemp("verify-first-demo")
    rules = []
    for n, row in enumerate(sorted(rows, key=lambda r: r["question"])):
        asked, gold = f"Question: {row['question'].strip()}", row["answers"][0]
        rules += [
            {"when_all": [asked, "Evidence:"], "answer": gold},
            {"when_all": [asked], "when_none": ["Evidence:"], "answer": gold if n % 2 else "Atlantis"},
        ]
    (here / "reader.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rules))
    config = yaml.safe_load((home / "config.yaml").read_text())
    config["models"]["demo-reader"] = {**flowkit.READER, "script": str(here / "reader.jsonl")}
    config["models"]["verify-router"] = {"backend": "scripted", "script": str(flowkit.DRYRUN / "verify-router.jsonl")}
    config.setdefault("evaluation", {})["verify_first"] = {"router": "verify-router", "verifier": "lexical"}
    (here / "config.yaml").write_text(yaml.safe_dump(config))
    outs = {}
    for system in ("plain", "verify-first"):
        outs[system] = here / system
        result = CliRunner().invoke(
            app,
            [
                "evaluate",
                str(release),
                "--model",
                "demo-reader",
                "--config",
                str(here / "config.yaml"),
                "--scenario",
                "oracle",
                "--system",
                system,
                "--out",
                str(outs[system]),
            ],
        )
        assert result.exit_code == 0, result.output
    answers = pl.read_parquet(outs["verify-first"] / "answers.parquet")
    kept, abstained = answers.filter(~pl.col("abstained")), answers.filter(pl.col("abstained"))
    assert kept.height >= 1 and abstained.height >= 1
    assert set(abstained["gate_reason"].to_list()) == {"the answers with and without context disagree"}
    assert all(r.startswith("consistent, confidence 1 >= 0.9") for r in kept["gate_reason"].to_list())
    assert json.loads(kept["trace"][0])["router"]["model"] == "verify-router"
    table = (outs["verify-first"] / "table.md").read_text()
    assert "verifier: the lexical stand-in" in table and "router: scripted model 'verify-router'" in table
    code, out, _ = run_cli(capsys, monkeypatch, "compare-evals", str(outs["plain"]), str(outs["verify-first"]))
    assert code == 0 and "kept correct" in out and "broken" in out
