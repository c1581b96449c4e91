"""Every mistake a user can make at the command line is one line (exit 2), never a traceback;
argument and config mistakes are found before Prefect starts."""

from __future__ import annotations

import csv
import json
import shutil
import textwrap
from pathlib import Path

import huggingface_hub.constants
import pytest

from tests.releases.cli_helpers import one_line, run_cli, run_process

SCRIPT = '{"when_all": ["Question:"], "answer": "answer 1"}\n'
CONFIG = """
workdir: work
releases_root: releases
models:
  reader: {{backend: scripted, script: reader.jsonl, default: "no idea"}}
judge: {{kind: lexical}}
deflectionbench:
  sources: [{{name: webqa, root: {root}}}]
  gating: {{pool: [reader]}}
  k_min: 3
"""


def config(tmp_path: Path, root: Path | str) -> Path:
    (tmp_path / "reader.jsonl").write_text(SCRIPT)
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(CONFIG.format(root=root)))
    return path


def test_verify_first_on_a_reflvqa_release_is_a_usage_error(capsys, monkeypatch, no_prefect, tmp_path, reflvqa_release):
    code, _, err = run_cli(
        capsys,
        monkeypatch,
        "evaluate",
        str(reflvqa_release),
        "--model",
        "reader",
        "--config",
        str(config(tmp_path, tmp_path)),
        "--system",
        "verify-first",
    )
    one_line(code, err, "--system: not an option of the reflvqa evaluation")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--setting", "textrag"],
            "unknown RefLVQA setting textrag; known: text, image, multi, two-step, image-cot, "
            "image-self-refine, image-caption",
        ),
        (["--queries", "11"], "--queries must be between 1 and 10, got 11"),
        (["--subset", "some"], "--subset must be one of verified, all, got some"),
        (["--subset", "verified"], "--subset verified: no verification labels configured"),
    ],
)
def test_the_reflvqa_grid_is_checked_before_prefect(
    capsys, monkeypatch, no_prefect, tmp_path, reflvqa_release, flags, message
):
    code, _, err = run_cli(
        capsys,
        monkeypatch,
        "evaluate",
        str(reflvqa_release),
        "--model",
        "reader",
        "--config",
        str(config(tmp_path, tmp_path)),
        *flags,
    )
    one_line(code, err, message)


def test_a_reflvqa_option_on_deflectionbench_is_one_line(capsys, monkeypatch, no_prefect, copy, tmp_path):
    code, _, err = run_cli(
        capsys,
        monkeypatch,
        "evaluate",
        str(copy),
        "--model",
        "reader",
        "--config",
        str(config(tmp_path, tmp_path)),
        "--setting",
        "text",
    )
    one_line(code, err, "--setting: not an option of the deflectionbench evaluation")


def test_unknown_system_is_one_line(capsys, monkeypatch, no_prefect, copy, tmp_path):
    code, _, err = run_cli(
        capsys,
        monkeypatch,
        "evaluate",
        str(copy),
        "--model",
        "reader",
        "--config",
        str(config(tmp_path, tmp_path)),
        "--system",
        "cruise",
    )
    one_line(code, err, "unknown answering system 'cruise'; known: plain, verify-first")


def test_evaluate_one_scenario_other_than_realistic(copy, tmp_path, prefect_harness):
    out = tmp_path / "eval"
    code, stdout, err = run_process(
        "evaluate",
        str(copy),
        "--model",
        "reader",
        "--config",
        str(config(tmp_path, tmp_path)),
        "--scenario",
        "oracle",
        "--out",
        str(out),
    )
    assert code == 0, err
    assert "| oracle |" in (out / "table.md").read_text() and (out / "answers.parquet").is_file()
    # the table alone on stdout (`> table.md` works), the logs and the folder on stderr
    assert stdout == (out / "table.md").read_text() and str(out) in err
    assert not (out / "metrics_vs_negatives.png").exists()  # plotted only when realistic ran


def test_run_with_a_missing_source_root_fails_before_prefect(capsys, monkeypatch, no_prefect, tmp_path):
    code, _, err = run_cli(
        capsys, monkeypatch, "run", "deflectionbench", "--config", str(config(tmp_path, tmp_path / "no-such-dir"))
    )
    one_line(code, err, "deflectionbench.sources[0] (webqa): root", "no-such-dir is not a readable directory")


def test_run_of_a_published_version_with_other_settings_fails_before_prefect(
    capsys, monkeypatch, no_prefect, copy, tmp_path
):
    (tmp_path / "webqa").mkdir()
    code, _, err = run_cli(
        capsys, monkeypatch, "run", "deflectionbench", "--config", str(config(tmp_path, tmp_path / "webqa"))
    )
    one_line(code, err, "deflectionbench 1.0.0 exists and this run differs from it", "--version")


def test_publish_without_a_token_or_offline(capsys, monkeypatch, copy, tmp_path):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no token saved by `hf auth login` either
    code, _, err = run_cli(capsys, monkeypatch, "publish", str(copy), "--repo-id", "org/bench")
    one_line(code, err, "publishing to the Hub needs a token: set HF_TOKEN")
    monkeypatch.setenv("HF_TOKEN", "hf_test_not_a_real_token")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    code, _, err = run_cli(capsys, monkeypatch, "publish", str(copy), "--repo-id", "org/bench")
    one_line(code, err, "cannot publish to the Hub in offline mode")
    assert "hf_test_not_a_real_token" not in err


@pytest.mark.parametrize("command", ["validate", "why", "diff", "evaluate"])
def test_a_truncated_shard_is_one_line(capsys, monkeypatch, copy, tmp_path, command, prefect_harness):
    shard = copy / "data" / "test-00000-of-00002.parquet"
    shard.write_bytes(shard.read_bytes()[:200])
    args = {
        "validate": [str(copy)],
        "why": [str(copy), "some-sample"],
        "diff": [str(copy), str(copy)],
        "evaluate": [
            str(copy),
            "--model",
            "reader",
            "--config",
            str(config(tmp_path, tmp_path)),
            "--scenario",
            "oracle",
        ],
    }[command]
    if command == "evaluate":  # a flow run
        code, _, err = run_process(command, *args)
    else:
        code, _, err = run_cli(capsys, monkeypatch, command, *args)
    assert code == 2 and "Traceback" not in err, err
    assert err.splitlines()[-1].startswith("mmcurate: error: ") and "is unreadable" in err.splitlines()[-1]


@pytest.mark.parametrize("command", ["verify", "validate", "why", "diff", "report"])
def test_an_empty_manifest_is_one_line(capsys, monkeypatch, copy, command):
    (copy / "manifest.json").write_text("{}")
    args = {"why": [str(copy), "x"], "diff": [str(copy), str(copy)]}.get(command, [str(copy)])
    code, _, err = run_cli(capsys, monkeypatch, command, *args)
    one_line(code, err, "is not a release manifest")


def test_diff_across_benchmarks_is_refused(capsys, monkeypatch, deflection_release, reflvqa_release):
    code, _, err = run_cli(capsys, monkeypatch, "diff", str(deflection_release), str(reflvqa_release))
    one_line(code, err, "cannot diff deflectionbench 1.0.0 against reflvqa 1.0.0")


def test_annotate_export_into_the_release_is_refused(capsys, monkeypatch, tmp_path, reflvqa_release):
    release = tmp_path / "reflvqa" / "1.0.0"
    shutil.copytree(reflvqa_release, release)
    code, _, err = run_cli(
        capsys, monkeypatch, "annotate", "export", str(release), "--n", "1", "--out", str(release / "batch")
    )
    one_line(code, err, "lies inside the release")
    assert not (release / "batch").exists()


def test_annotate_import_reads_a_bom_and_refuses_other_encodings(capsys, monkeypatch, tmp_path, reflvqa_release):
    code, _, err = run_cli(
        capsys, monkeypatch, "annotate", "export", str(reflvqa_release), "--n", "1", "--out", str(tmp_path / "batch")
    )
    assert code == 0, err
    row = json.loads((tmp_path / "batch" / "batch.jsonl").read_text().splitlines()[0])
    row.update(needs_verification="yes", documents_support="yes", sentence_grounded="yes", annotator="Zoë")
    fields = ["item_id", "needs_verification", "documents_support", "sentence_grounded", "annotator"]
    with (tmp_path / "bom.csv").open("w", encoding="utf-8-sig", newline="") as handle:  # as spreadsheets save
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerow({k: row[k] for k in fields})
    code, out, err = run_cli(
        capsys,
        monkeypatch,
        "annotate",
        "import",
        str(reflvqa_release),
        str(tmp_path / "bom.csv"),
        "--out",
        str(tmp_path / "verified"),
    )
    assert code == 0, err
    assert "1 item from 1 annotator (Zoë)" in out
    (tmp_path / "latin1.csv").write_bytes((tmp_path / "bom.csv").read_text(encoding="utf-8-sig").encode("latin-1"))
    (tmp_path / "latin1.jsonl").write_bytes(
        json.dumps({k: row[k] for k in fields}, ensure_ascii=False).encode("latin-1") + b"\n"
    )
    for name in ("latin1.csv", "latin1.jsonl"):
        code, _, err = run_cli(
            capsys,
            monkeypatch,
            "annotate",
            "import",
            str(reflvqa_release),
            str(tmp_path / name),
            "--out",
            str(tmp_path / "verified2"),
        )
        one_line(code, err, f"{name}:", "not UTF-8 text")


def test_plan_of_a_reflvqa_evaluation(capsys, monkeypatch, tmp_path, reflvqa_release):
    path = str(config(tmp_path, tmp_path))
    code, out, _ = run_cli(
        capsys,
        monkeypatch,
        "plan",
        path,
        "--evaluate",
        str(reflvqa_release),
        "--model",
        "reader",
        "--setting",
        "text",
        "--setting",
        "two-step",
        "--queries",
        "4",
    )
    assert code == 0
    steps = [line.split()[-7] for line in out.splitlines() if "evaluate.reflvqa." in line]
    assert steps[:2] == ["evaluate.reflvqa.queries.n4", "evaluate.reflvqa.text.n4"]
    assert "evaluate.reflvqa.two-step.n4.text" in steps
    code, _, err = run_cli(capsys, monkeypatch, "plan", path, "--model", "reader")
    one_line(code, err, "plan an evaluation with both --evaluate RELEASE and --model MODEL")
