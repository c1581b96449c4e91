"""``mmcurate run cragmm`` then ``mmcurate evaluate --system cruise`` end to end on the bundled
CRAG-MM fixtures with scripted models: the unfiltered release and its quarantine, CRUISE's
answers (retrieval through the fixtures' image index, the gate, the budget), the CRAG table per
set, domain and query category, and one-line refusals of bad options."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from mmcurate.releases.reader import open_release
from tests.flows import flowkit
from tests.releases.cli_helpers import run_cli

pytestmark = pytest.mark.slow

# every fixture question and its gold answer: the scripted reader answers right with context
ANSWERS = {
    "what animal is this?": "This is a tabby cat.",
    "what drink is in this cup?": "It is an espresso.",
    "what kind of vehicle is this?": "It is a rocket.",
    "who makes this kind of clock?": "Seth Thomas.",
    "what type of building is this?": "This is a pavilion.",
    "how fast can it run?": "About 55 km/h.",
    "what is this person's job?": "This person is an astronaut.",
    "which agency flies them to space?": "NASA.",
    "how many people have been to space?": "About 600.",
    "what flower is this?": "It is a dahlia.",
    "does it need full sun?": "Yes.",
}


def reader_rules() -> list[dict]:
    rules = [
        {"when_all": ["OUTSIDE KNOWLEDGE:", "worth today"], "answer": "OUTSIDE KNOWLEDGE: yes\nTIME-SENSITIVE: yes"},
        {"when_all": ["OUTSIDE KNOWLEDGE:"], "answer": "OUTSIDE KNOWLEDGE: yes\nTIME-SENSITIVE: no"},
        {"when_all": ["Proposed answer 1"], "answer": "yes"},
        {"when_all": ["Proposed answer:"], "answer": "CONFIDENCE: 0.95\nREASONING: the evidence says so"},
    ]
    rules += [{"when_all": [f"Question: {q}"], "answer": a} for q, a in ANSWERS.items()]
    return rules


@pytest.fixture(scope="module")
def home(tmp_path_factory, fixtures_root: Path, prefect_harness) -> tuple[Path, Path]:
    from mmcurate.flows.cragmm.curate import cragmm

    home = tmp_path_factory.mktemp("cragmm")
    (home / "reader.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reader_rules()))
    root = fixtures_root / "cragmm"
    config = {
        "workdir": "work",
        "releases_root": "releases",
        "judge": {"kind": "lexical"},
        "models": {
            "reader": {"backend": "scripted", "script": str(home / "reader.jsonl"), "vision": True},
            "cruise-vlm": {"backend": "scripted", "script": str(root / "cruise_vlm.jsonl"), "vision": True},
            "summariser": {
                "backend": "scripted",
                "script": str(root / "summariser.jsonl"),
                "vision": True,
                "default": "",
            },
        },
        "cragmm": {"sources": [{"name": "cragmm", "root": str(root)}]},
        # no budget here: wall-clock time is never part of a test (the budget's tests script their clock)
        "cruise": {
            "summariser": "summariser",
            "search": "image",
            "image_index": str(root / "image_kg"),
            "web_index": str(root / "web" / "pages.jsonl"),
            "turn_seconds": None,
        },
    }
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    # the curation in process (a first flow run inside CliRunner would tie Prefect's console to its stream)
    release = Path(cragmm(config=str(home / "config.yaml")))
    assert release == home / "releases" / "cragmm" / "1.0.0"
    return home, release


def evaluate(home: Path, release: Path, *extra: str, model: str = "reader"):
    from mmcurate.cli import app

    return CliRunner().invoke(
        app, ["evaluate", str(release), "--model", model, "--config", str(home / "config.yaml"), *extra]
    )


def test_the_release_holds_every_readable_conversation(home):
    _, path = home
    release = open_release(path)
    turns = release.table("turns")
    assert turns.num_rows == 13 and release.table("conversations").num_rows == 9
    assert sorted(set(turns["set"].to_pylist())) == ["multi_turn", "single_turn"]
    assert release.quarantine.num_rows == 5
    assert json.loads((path / "quality" / "validation.json").read_text())["success"] is True
    sections = flowkit.report_sections(path)
    assert not set(flowkit.DEFLECTION_SECTIONS) & set(sections) and len(sections) == len(set(sections)), sections


def test_cruise_on_task_3_and_the_crag_tables(home):
    home_dir, release = home
    out = home_dir / "cruise-t3"
    result = evaluate(home_dir, release, "--system", "cruise", "--task", "3", "--out", str(out))
    assert result.exit_code == 0, result.output
    answers = pl.read_parquet(out / "answers.parquet").sort(["session_id", "turn"])
    assert answers.height == 7 and set(answers["set"].to_list()) == {"multi_turn"}
    flower = answers.filter(pl.col("session_id") == "mt-flower")
    assert flower["answer"].to_list() == ["It is a dahlia.", "Yes."]
    assert not any(answers["timed_out"].to_list())
    first = json.loads(answers.filter(pl.col("session_id") == "mt-astronaut")["trace"][0])
    assert first["summary"]["text"] == "An astronaut in a white space suit holds a helmet."
    assert first["context"]["query"].startswith("what is this person's job? An astronaut")
    table = (out / "table.md").read_text()
    assert "(cruise system, task 3, 7 turns)" in table.splitlines()[0]
    for heading in ("## Per set", "## Per domain", "## Per query category", "## Time budget", "## Multi-turn"):
        assert heading in table
    assert "summariser: scripted model 'summariser'" in table and "Multi-turn rule (competition)" in table
    by_set = pl.read_parquet(out / "crag_by_set.parquet")
    assert by_set["set"].to_list() == ["ego", "multi_turn"]  # every multi-turn fixture image is egocentric
    assert by_set.row(0)[1:] == by_set.row(1)[1:]
    multi = by_set.row(1, named=True)
    assert multi["accuracy"] + multi["missing"] + multi["hallucination"] == pytest.approx(1.0)


def test_the_demos_cruise_keeps_abstains_and_its_ablations_differ(home, capsys, monkeypatch):
    """Issue 37 on the demo's stand-in (``cruise-vlm``, rules written against the fixtures): CRUISE
    keeps an answer, abstains on others for a reason ``mmcurate why`` prints, and Table 1's rows differ
    (issue 32 item 14) in the paper's order (issue 43 item 1)."""
    home_dir, release = home
    out = home_dir / "cruise-demo"
    result = evaluate(
        home_dir,
        release,
        "--system",
        "cruise",
        "--limit",
        "1",
        "--ablation",
        "no-cov",
        "--ablation",
        "no-cov-no-consistency",
        "--ablation",
        "rag-agent",
        "--out",
        str(out),
        model="cruise-vlm",
    )
    assert result.exit_code == 0, result.output
    answers = pl.read_parquet(out / "answers.parquet")
    cruise = answers.filter(pl.col("variant") == "cruise")
    assert cruise.height == 4 and (~cruise["abstained"]).sum() >= 1 and cruise["abstained"].sum() >= 1
    reasons = set(cruise.filter(pl.col("abstained"))["reason"].to_list())
    assert reasons == {"the answers with and without context disagree"}
    rows = pl.read_parquet(out / "crag_by_variant.parquet")
    assert rows["variant"].to_list() == ["cruise", "no-cov", "no-cov-no-consistency", "rag-agent"]
    cells = [tuple(r) for r in rows.select(["accuracy", "missing", "hallucination"]).rows()]
    assert len(set(cells)) == 4  # every row of Table 1 differs
    row = {r["variant"]: r for r in rows.to_dicts()}
    missing = [row[v]["missing"] for v in ("no-cov-no-consistency", "no-cov", "cruise", "rag-agent")]
    assert missing == sorted(missing, reverse=True)  # Table 1: w/o CoV & SC >= w/o CoV >= CRUISE >= RAG agent
    assert (
        max(row["no-cov"]["hallucination"], row["no-cov-no-consistency"]["hallucination"])
        <= row["cruise"]["hallucination"]
        <= row["rag-agent"]["hallucination"]
    )
    assert (row["cruise"]["missing"], row["cruise"]["hallucination"]) == (0.5, 0.0)
    table = (out / "table.md").read_text()
    assert "## Table 1: the system and its ablations (all turns)" in table
    assert "answering model: scripted model 'cruise-vlm' (rules in cruise_vlm.jsonl)" in table
    sample = cruise.filter(pl.col("reason") == "the answers with and without context disagree")["sample_id"][0]
    code, printed, _ = run_cli(capsys, monkeypatch, "why", str(out), sample)
    assert code == 0 and "the answers with and without context disagree" in printed, printed


def test_runs_of_two_tasks_share_one_folder(home):
    """Issue 31 item 2: a run of another task adds its turns; its tables are per task."""
    home_dir, release = home
    out = home_dir / "cruise-tasks"
    for task in ("1", "3"):
        result = evaluate(home_dir, release, "--system", "cruise", "--task", task, "--out", str(out))
        assert result.exit_code == 0, result.output
    answers = pl.read_parquet(out / "answers.parquet")
    assert sorted(answers.group_by("task").len().rows()) == [("1", 6), ("3", 7)]
    by_set = pl.read_parquet(out / "crag_by_set.parquet")
    assert sorted(by_set.select(["task", "set"]).rows()) == [
        ("1", "ego"),
        ("1", "single_turn"),
        ("3", "ego"),
        ("3", "multi_turn"),
    ]
    table = (out / "table.md").read_text()
    assert "(cruise system, task 1, task 3, 13 turns)" in table.splitlines()[0]
    [shown] = [line for line in table.splitlines() if "Also shown" in line]
    assert shown.startswith("- Also shown: 1 cell of earlier runs into this folder (task 1, variant cruise);")


def test_plain_and_bad_options(home, capsys, monkeypatch):
    home_dir, release = home
    out = home_dir / "plain"
    result = evaluate(home_dir, release, "--limit", "1", "--out", str(out))
    assert result.exit_code == 0, result.output
    answers = pl.read_parquet(out / "answers.parquet")
    assert answers.height == 1 + 3  # one conversation per set: st-cat, mt-astronaut (3 turns)
    for extra, message in (
        (("--task", "4"), "unknown CRAG-MM task"),
        (("--scenario", "oracle"), "--scenario: not an option of the cragmm evaluation"),
        (("--system", "verify-first"), "unknown answering system"),
        # issue 31 item 14: 0 is a limit given, not a limit left out (it ran everything)
        (("--limit", "0"), "--limit must be at least 1"),
        (("--limit", "-2"), "--limit must be at least 1"),
    ):
        code, _, err = run_cli(
            capsys,
            monkeypatch,
            "evaluate",
            str(release),
            "--model",
            "reader",
            "--config",
            str(home_dir / "config.yaml"),
            *extra,
        )
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_cruise_without_its_section_is_refused_before_any_flow(home, capsys, monkeypatch, tmp_path):
    def no_flow(call):
        raise AssertionError("the command started a flow run")

    monkeypatch.setattr("mmcurate.cli.run.run_flow", no_flow)
    home_dir, release = home
    config = yaml.safe_load((home_dir / "config.yaml").read_text())
    del config["cruise"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    code, _, err = run_cli(
        capsys,
        monkeypatch,
        "evaluate",
        str(release),
        "--model",
        "reader",
        "--config",
        str(tmp_path / "config.yaml"),
        "--system",
        "cruise",
    )
    assert code == 2 and "--system cruise needs a 'cruise' section" in err and len(err.strip().splitlines()) == 1, err


def test_lmms_eval_task_gives_the_plain_runs_single_turn_numbers(home):
    """The release's lmms-eval task (single-turn conversations), fed the plain run's answers
    through lmms-eval's own task objects, computes the run's CRAG numbers for that set."""
    if importlib.util.find_spec("lmms_eval") is None:  # never imported here: see tests/releases/lmms_helpers.py
        pytest.skip("lmms-eval is not installed (pip install 'mmcurate[test]')")
    from mmcurate.evaluation.crag import RATES
    from mmcurate.releases.cragmm.draft import KIND
    from mmcurate.releases.lmms_export import export_release, group_name
    from tests.releases.lmms_helpers import harness_numbers

    home_dir, release = home
    out = home_dir / "plain-all"
    # one turn has no scripted answer: a failed call, missing in CRAG's accounting, as an empty
    # reply is in the harness's
    assert evaluate(home_dir, release, "--out", str(out), "--allow-incomplete").exit_code == 0
    answers = {
        sid: answer or ""
        for sid, answer in pl.read_parquet(out / "answers.parquet").select("sample_id", "answer").iter_rows()
    }
    opened = open_release(release)
    export_release(opened, KIND, home_dir / "tasks")
    group = group_name("cragmm", opened.version)
    numbers = harness_numbers(home_dir / "tasks", group, {"*": answers}, home_dir)
    expected = pl.read_parquet(out / "crag_by_set.parquet").filter(pl.col("set") == "single_turn").row(0, named=True)
    for rate in RATES:
        assert numbers[f"{group}_single_turn"][rate] == pytest.approx(expected[rate]), rate
