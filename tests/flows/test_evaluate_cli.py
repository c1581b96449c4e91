"""``mmcurate evaluate`` end to end on the dry-run release (scripted models, no model server):
the strictness sweep and the negative-modality analysis from one command, and bad options
refused in one line before any flow starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner


@pytest.fixture(scope="module")
def dryrun(tmp_path_factory, dryrun_config, prefect_harness):
    from mmcurate.flows.deflectionbench.curate import deflectionbench

    home = tmp_path_factory.mktemp("evaluate-cli")
    path = dryrun_config(home)
    return home, path, Path(deflectionbench(config=str(path)))


def test_sweep_and_modality_analysis_in_one_run(dryrun):
    from mmcurate.cli import app

    home, config, release = dryrun
    out = home / "eval"
    result = CliRunner().invoke(
        app,
        [
            "evaluate",
            str(release),
            "--model",
            "vlm-reader",
            "--config",
            str(config),
            "--negatives",
            "2",
            "--strictness-sweep",
            "--modality-analysis",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    answers = pl.read_parquet(out / "answers.parquet")
    assert set(answers["abstention"].to_list()) == {"none", "soft", "moderate", "severe"}
    keys = answers.select(["sample_id", "scenario", "n_negatives", "negatives", "abstention"])
    assert keys.unique().height == answers.height  # one row per item key
    table = (out / "table.md").read_text()
    assert "## Strictness sweep (realistic and adversarial at 2 negatives)" in table
    sweep = pl.read_parquet(out / "metrics_strictness.parquet")
    assert sweep.height == 4 * 4 and set(sweep["scenario"].to_list()) == {
        "parametric",
        "oracle",
        "realistic",
        "adversarial",
    }
    # the dry-run release (scripted, golden content): 3 samples with text gold and 1 with image gold
    # have two negatives of each modality (since Stage II mines per source, issue 32, the text-mined
    # sources get no image negatives); each runs with text, image and multimodal negatives
    modality = answers.filter(pl.col("negatives") != "ranked")
    per_level = modality.filter(pl.col("abstention") == "moderate")
    assert per_level.group_by("gold_modality").len().sort("gold_modality").rows() == [("image", 3), ("text", 9)]
    assert set(modality["scenario"].to_list()) == {"realistic"} and set(modality["n_negatives"].to_list()) == {2}
    assert "## Negative-modality analysis (realistic scenario)" in table
    assert "| moderate | text | image | 100.0 | 0.0 | 0.0 | 3 | 0 |" in table


@pytest.mark.parametrize(
    "args, message",
    [
        (["--negatives", "21"], "number of negatives must be in 1..20, got 21"),
        (["--scenario", "closed-book"], "unknown scenario 'closed-book'"),
        (["--abstention", "extreme"], "unknown abstention level 'extreme'"),
        (["--abstention", "soft", "--strictness-sweep"], "not both"),
        (["--model", "nobody"], "model 'nobody' is neither defined"),
    ],
)
def test_bad_options_fail_in_one_line_before_prefect(dryrun, args, message):
    home, config, release = dryrun
    model = [] if "--model" in args else ["--model", "vlm-reader"]
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "mmcurate"),
            "evaluate",
            str(release),
            *model,
            "--config",
            str(config),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("mmcurate: error: ") and message in line
    assert "prefect" not in (proc.stdout + proc.stderr).lower()  # refused before a flow (or its server) started


def test_runs_with_other_negatives_and_abstention_add_their_cells_to_one_folder(dryrun, caplog):
    """Issue 31 item 2: two runs into the default folder keep both; a cell run again is replaced, said so."""
    from mmcurate.cli import app

    home, config, release = dryrun
    out = home / "work" / "evaluations" / "deflectionbench-1.0.0" / "vlm-reader"

    def evaluate(*options: str) -> str:
        result = CliRunner().invoke(
            app,
            [
                "evaluate",
                str(release),
                "--model",
                "vlm-reader",
                "--config",
                str(config),
                "--scenario",
                "realistic",
                *options,
            ],
        )
        assert result.exit_code == 0, result.output
        return caplog.text

    evaluate("--negatives", "1")
    evaluate("--negatives", "2", "--abstention", "severe")
    answers = pl.read_parquet(out / "answers.parquet")
    cells = answers.select(["n_negatives", "abstention", "run_id"]).unique()
    assert sorted(cells.select(["n_negatives", "abstention"]).rows()) == [(1, "moderate"), (2, "severe")]
    assert cells["run_id"].n_unique() == 2  # each cell keeps the run that answered it
    samples = answers.filter(pl.col("n_negatives") == 1).height
    assert samples > 0 and answers.height == 2 * samples
    table = (out / "table.md").read_text()
    assert "(moderate, severe abstention, plain system)" in table.splitlines()[0]
    assert "Also shown: 1 cell of earlier runs" in table
    assert pl.read_parquet(out / "crag.parquet").height == answers.height
    caplog.clear()
    logged = evaluate("--negatives", "1")
    assert (
        "replaces the earlier 1 cell scenario realistic, n_negatives 1, negatives ranked, abstention moderate" in logged
    )
    again = pl.read_parquet(out / "answers.parquet")
    assert again.height == answers.height
    assert (
        again.filter(pl.col("n_negatives") == 2)["run_id"].to_list()
        == answers.filter(pl.col("n_negatives") == 2)["run_id"].to_list()
    )  # the other run's cell untouched
    assert again.filter(pl.col("n_negatives") == 1)["run_id"].n_unique() == 1
    assert again.filter(pl.col("n_negatives") == 1)["run_id"][0] not in set(cells["run_id"].to_list())


def _model_file(folder: Path) -> Path:
    """The dry run's reader as a model file (the bundled demo config does not define it)."""
    import yaml

    from tests.flows import flowkit

    path = folder / "vlm-reader.yaml"
    path.write_text(yaml.safe_dump({"name": "vlm-reader", **flowkit.READER}))
    return path


# a command without --config sets these for its flow: CliRunner restores them after each call
UNSET_PLACES = {"MMCURATE_WORKDIR": None, "MMCURATE_RELEASES_ROOT": None}


def test_without_config_the_workdir_is_the_current_directorys_and_said_first(dryrun, tmp_path, monkeypatch):
    """Issue 42 item 4: ``evaluate`` without --config wrote into the checkout's .mmcurate (the
    bundled demo.yaml's ``../.mmcurate``); it writes into the current directory's and says so first."""
    from mmcurate.cli import app
    from mmcurate.core.config import bundled_config

    _, _, release = dryrun
    model = _model_file(tmp_path)
    here = tmp_path / "elsewhere"
    here.mkdir()
    monkeypatch.chdir(here)
    result = CliRunner().invoke(
        app, ["evaluate", str(release), "--model", str(model), "--scenario", "oracle"], env=UNSET_PLACES
    )
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == (
        f"mmcurate: no --config: the bundled {bundled_config('demo.yaml')} with workdir {here / '.mmcurate'} "
        f"and releases_root {here / 'releases_out'}"
    )
    assert (here / ".mmcurate" / "evaluations" / "deflectionbench-1.0.0" / "vlm-reader" / "table.md").is_file()


def test_a_folder_of_one_decoding_refuses_a_run_at_another_before_any_call(dryrun, tmp_path, monkeypatch):
    """Issue 42 item 12: a run at temperature 1.5 into a folder of 0.2 runs showed "Decoding: ...
    1.5" over cells run at 0.2 and overwrote release.json. A folder holds one decoding: another is
    refused in one line, before any model call, and the folder is left as it was."""
    from mmcurate.cli import app
    from mmcurate.models.client import ModelClient

    home, config, release = dryrun
    out = tmp_path / "eval"
    args = [
        "evaluate",
        str(release),
        "--model",
        "vlm-reader",
        "--config",
        str(config),
        "--scenario",
        "oracle",
        "--out",
        str(out),
    ]
    assert CliRunner().invoke(app, args).exit_code == 0
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    assert json.loads((out / "release.json").read_text())["decoding"]["temperature"] == 0.2
    called: list[str] = []
    real = ModelClient.chat
    monkeypatch.setattr(
        ModelClient, "chat", lambda self, requests, stage: called.append(stage) or real(self, requests, stage)
    )
    hot = CliRunner().invoke(app, args, env={"MMCURATE_EVALUATION__DEFLECTIONBENCH__DECODING__TEMPERATURE": "1.5"})
    assert hot.exit_code != 0
    assert (
        "holds evaluation runs of another decoding (decoding temperature 0.2 -> 1.5): its rows cannot be "
        "merged; write this run elsewhere with --out DIR"
    ) in str(hot.exception) + hot.output
    assert called == [] and {path.name: path.read_bytes() for path in out.iterdir()} == before
    same = CliRunner().invoke(app, args + ["--scenario", "parametric"])  # the same decoding still adds its cells
    assert same.exit_code == 0, same.output


def test_stdout_holds_the_table_alone(dryrun):
    """Issue 42 item 19: ``evaluate ... > table.md`` holds the table and nothing else; progress
    and the run's log lines go to stderr."""
    from tests.releases.cli_helpers import run_process

    home, config, release = dryrun
    out = home / "stdout-only"
    code, stdout, stderr = run_process(
        "evaluate",
        str(release),
        "--model",
        "vlm-reader",
        "--config",
        str(config),
        "--scenario",
        "oracle",
        "--out",
        str(out),
    )
    assert code == 0, stderr
    assert stdout == (out / "table.md").read_text()
    assert f"evaluation: {out}" in stderr
