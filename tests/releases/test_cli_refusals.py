"""Refusals before anything is written (issue 22): bad numbers and shapes in a config, outputs
inside a release, a batch people already labelled, and inputs of the wrong kind: one line,
exit 2, nothing half-written."""

from __future__ import annotations

import csv
import textwrap
from pathlib import Path

import polars as pl
import pytest

from tests.releases.cli_helpers import one_line, run_cli


def config(tmp_path: Path, model: str = "", section: str = "") -> Path:
    (tmp_path / "reader.jsonl").write_text('{"when_all": ["Question:"], "answer": "answer 1"}\n')
    (tmp_path / "webqa").mkdir(exist_ok=True)
    section = section or "deflectionbench:\n  sources: [{name: webqa, root: webqa}]\n  gating: {pool: [reader]}\n"
    text = (
        textwrap.dedent(f"""\
        workdir: work
        releases_root: releases
        models:
          reader: {{backend: scripted, script: reader.jsonl, default: "no idea"{model}}}
        """)
        + section
    )
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------- item 2: the config
@pytest.mark.parametrize(
    "model, section, needle",
    [
        (", concurrency: 0", "", "models.reader.concurrency: Input should be greater than or equal to 1"),
        (
            "",
            "deflectionbench:\n  sources: [{name: webqa, root: webqa}]\n  gating: {pool: [reader]}\n  k_min: -3\n",
            "deflectionbench.k_min",
        ),
        ("", "deflectionbench:\n  sources: []\n  gating: {pool: [reader]}\n", "deflectionbench.sources"),
        (
            "",
            "deflectionbench:\n  sources: [{name: webqa, root: webqa, limit: -5}]\n  gating: {pool: [reader]}\n",
            "deflectionbench.sources[0].limit",
        ),
        (
            "",
            "deflectionbench:\n  sources: [{name: webqa, root: webqa, options: {qcate: 5}}]\n  gating: {pool: [reader]}\n",
            "deflectionbench.sources[0].options.qcate",
        ),
    ],
)
def test_run_with_a_bad_setting_is_one_line_before_prefect(
    capsys, monkeypatch, no_prefect, tmp_path, model, section, needle
):
    code, _, err = run_cli(
        capsys, monkeypatch, "run", "deflectionbench", "--config", str(config(tmp_path, model, section))
    )
    one_line(code, err, needle)


@pytest.mark.parametrize("command", [["run", "deflectionbench", "--config"], ["plan"]])
def test_a_config_that_is_a_yaml_list_is_one_line(capsys, monkeypatch, no_prefect, tmp_path, command):
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    code, _, err = run_cli(capsys, monkeypatch, *command, str(path))
    one_line(code, err, "expected a mapping of settings at the top level, got a list")


def test_publish_target_dir_that_is_a_file(capsys, monkeypatch, copy, tmp_path):
    (tmp_path / "a-file").write_text("x")
    code, _, err = run_cli(
        capsys, monkeypatch, "publish", str(copy), "--repo-id", "org/b", "--target-dir", str(tmp_path / "a-file")
    )
    one_line(code, err, "--target-dir", "a-file is a file, not a folder")


def test_judge_agreement_given_a_folder_or_an_unknown_grade(capsys, monkeypatch, tmp_path):
    (tmp_path / "grades").mkdir()
    good = tmp_path / "a.parquet"
    pl.DataFrame({"key": ["k1", "k2"], "grade": ["CORRECT", "incorrect"]}).write_parquet(good)
    code, _, err = run_cli(capsys, monkeypatch, "judge-agreement", str(tmp_path / "grades"), str(good))
    one_line(code, err, "grades is a folder; give a grade file")
    bad = tmp_path / "b.parquet"
    pl.DataFrame({"key": ["k1", "k2"], "grade": ["CORRECT", "MAYBE"]}).write_parquet(bad)
    code, _, err = run_cli(capsys, monkeypatch, "judge-agreement", str(good), str(bad))
    one_line(code, err, "key 'k2' has grade 'MAYBE', not one of CORRECT, INCORRECT, NOT_ATTEMPTED, JUDGE_ERROR")


# ---------------------------------------------------------------------------- item 10: outputs inside a release
def test_ingest_out_inside_a_release(capsys, monkeypatch, copy, fixtures_root):
    code, _, err = run_cli(
        capsys, monkeypatch, "ingest", "viquae", str(fixtures_root / "viquae"), "--out", str(copy / "data" / "again")
    )
    one_line(code, err, "--out", "lies inside the release", str(copy.resolve()))
    assert not (copy / "data" / "again").exists()


def test_a_refused_ingest_leaves_no_folder_and_prints_one_line(capsys, monkeypatch, tmp_path, fixtures_root):
    """Issue 31 item 21: a refused ingest left an empty --out folder and a blank line on stdout."""
    code, out, err = run_cli(
        capsys, monkeypatch, "ingest", "reddit", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")
    )
    one_line(code, err, "not a readable directory")
    assert out == "" and not (tmp_path / "out").exists()
    (tmp_path / "kept").mkdir()  # a folder the user made stays
    code, _, err = run_cli(
        capsys, monkeypatch, "ingest", "reddit", str(tmp_path / "nowhere"), "--out", str(tmp_path / "kept")
    )
    assert code == 2 and (tmp_path / "kept").is_dir()
    code, out, err = run_cli(
        capsys, monkeypatch, "ingest", "reddit", str(fixtures_root / "reddit"), "--out", str(tmp_path / "reddit")
    )
    assert code == 0 and err == "" and out.count("\n") == 1 and out.startswith("reddit: 21 samples -> ")
    assert "skipped: " in out and " 0 (" not in out  # a reason met no time is not listed


def test_evaluate_out_inside_a_release(capsys, monkeypatch, no_prefect, copy, tmp_path):
    code, _, err = run_cli(
        capsys,
        monkeypatch,
        "evaluate",
        str(copy),
        "--model",
        "reader",
        "--config",
        str(config(tmp_path)),
        "--out",
        str(copy / "eval"),
    )
    one_line(code, err, "--out", "lies inside the release")


def test_publish_target_dir_inside_a_release(capsys, monkeypatch, copy):
    code, _, err = run_cli(
        capsys, monkeypatch, "publish", str(copy), "--repo-id", "org/b", "--target-dir", str(copy / "copy")
    )
    one_line(code, err, "--target-dir", "lies inside the release")
    assert not (copy / "copy").exists()


# ---------------------------------------------------------------------------- item 9: a labelled batch
def test_annotate_export_over_a_labelled_batch_needs_force(capsys, monkeypatch, tmp_path, reflvqa_release):
    out = tmp_path / "batch"
    code, _, err = run_cli(
        capsys, monkeypatch, "annotate", "export", str(reflvqa_release), "--n", "2", "--out", str(out)
    )
    assert code == 0, err
    code, _, err = run_cli(
        capsys, monkeypatch, "annotate", "export", str(reflvqa_release), "--n", "2", "--out", str(out)
    )
    assert code == 0, err  # nothing labelled yet: exporting again is harmless
    with (out / "batch.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    rows[0]["documents_support"] = "yes"
    with (out / "batch.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    labelled = (out / "batch.csv").read_text(encoding="utf-8")
    code, _, err = run_cli(
        capsys, monkeypatch, "annotate", "export", str(reflvqa_release), "--n", "2", "--out", str(out)
    )
    one_line(code, err, "holds a batch with 1 labelled row (", "--force")
    assert (out / "batch.csv").read_text(encoding="utf-8") == labelled  # the labels are still there
    code, _, err = run_cli(
        capsys, monkeypatch, "annotate", "export", str(reflvqa_release), "--n", "2", "--out", str(out), "--force"
    )
    assert code == 0, err
