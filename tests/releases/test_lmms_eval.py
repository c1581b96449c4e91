"""Releases as lmms-eval tasks, tested against the real lmms-eval package: its task manager
loads the exported folder (``--include_path``), its task objects build the documents and
call the exported functions, and its command line runs the tasks against the embedded
llama.cpp server. The numbers an lmms-eval run computes from a set of answers are the ones
``mmcurate evaluate`` computes from the same answers (one rule)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from mmcurate.core.images import ImageStore
from mmcurate.evaluation.deflectionbench.metrics import RATES, compute_metrics
from mmcurate.evaluation.deflectionbench.scenarios import SCENARIOS, evaluate, scenario_request
from mmcurate.judging.simpleqa import LexicalJudge
from mmcurate.models.backends.embedded import free_port
from mmcurate.releases.lmms_export import export_release, group_name
from mmcurate.releases.manifest import load_manifest
from mmcurate.releases.reader import open_release
from mmcurate.releases.unembed import canonical_samples
from mmcurate.releases.verify import verify_release
from tests.releases.cli_helpers import one_line, run_cli
from tests.releases.lmms_helpers import harness_documents, harness_numbers

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("lmms_eval") is None, reason="lmms-eval is not installed (pip install 'mmcurate[test]')"
)

GROUP = group_name("deflectionbench", "1.0.0")


def _kind():
    from mmcurate.releases.deflectionbench.draft import KIND

    return KIND


@pytest.fixture
def exported(deflection_release, tmp_path) -> Path:
    out = tmp_path / "tasks"
    export_release(open_release(deflection_release), _kind(), out)
    return out


def test_every_release_ships_its_tasks_sealed_with_it(deflection_release):
    manifest = load_manifest(deflection_release)
    assert manifest.lmms_eval["tasks"] == [f"{GROUP}_{s}" for s in SCENARIOS]
    assert f"lmms_eval/{GROUP}_realistic.yaml" in manifest.files and "lmms_eval/utils.py" in manifest.files
    task = (deflection_release / "lmms_eval" / f"{GROUP}_oracle.yaml").read_text()
    assert "data/test-*.parquet" in task and str(deflection_release) not in task  # relative to the release
    assert verify_release(deflection_release).ok


def test_lmms_eval_loads_the_tasks_and_sends_what_mmcurate_sends(deflection_release, exported, tmp_path):
    tasks = harness_documents(exported, GROUP, tmp_path)
    assert set(tasks) == {f"{GROUP}_{s}" for s in SCENARIOS}
    seed = load_manifest(deflection_release).seed
    store = ImageStore(exported.parent / "img")
    rows = {r["sample_id"]: r for r in canonical_samples(open_release(deflection_release), store).to_pylist()}
    for scenario in SCENARIOS:
        docs = tasks[f"{GROUP}_{scenario}"]
        assert len(docs) == len(rows)
        for doc in docs:
            ours = scenario_request(rows[doc["sample_id"]], scenario, 2, "moderate", seed).messages
            assert [m["role"] for m in doc["messages"]] == [m["role"] for m in ours]
            assert [m["texts"] for m in doc["messages"]] == [
                [m["content"]]
                if isinstance(m["content"], str)
                else [p["text"] for p in m["content"] if p["type"] == "text"]
                for m in ours
            ]
            shown = [
                p["sha256"]
                for m in ours
                if not isinstance(m["content"], str)
                for p in m["content"]
                if p["type"] == "image"
            ]
            sizes = [list(Image.open(store.path(sha)).size) for sha in shown]
            assert [size for m in doc["messages"] for size in m["images"]] == sizes  # the images, in order
            assert doc["visual"] == sizes


def test_the_same_answers_give_the_same_numbers(deflection_release, exported, world, tmp_path):
    release = open_release(deflection_release)
    samples = canonical_samples(release, ImageStore(exported.parent / "img"))
    # scripted answers: right from the gold passage, wrong from a distractor, else a refusal
    m = world.add(
        "m",
        [
            {"when_all": ["the gold passage for question 1"], "answer": "answer 1"},
            {"when_all": ["the gold passage for question 2"], "answer": "alias 2"},
            {"when_all": ["distractor passage 0 about topic 3"], "answer": "answer 9"},
            {"when_all": ["picture 4"], "answer": "answer 4"},
        ],
        default="I don't know",
    )
    ours = evaluate(
        samples, world.pool, LexicalJudge(), m, SCENARIOS, 2, "moderate", seed=release.manifest.seed, run_id="e"
    )
    expected = {row["scenario"]: row for row in compute_metrics(ours).to_pylist()}
    answers = {(r["sample_id"], r["scenario"]): r["answer"] for r in ours.to_pylist()}
    assert len({r["grade"] for r in ours.to_pylist()}) == 3  # the case holds right, wrong and declined answers
    replies = {
        f"{GROUP}_{scenario}": {sid: answer for (sid, s), answer in answers.items() if s == scenario}
        for scenario in SCENARIOS
    }
    numbers = harness_numbers(exported, GROUP, replies, tmp_path)
    for scenario in SCENARIOS:
        for rate in RATES:
            assert numbers[f"{GROUP}_{scenario}"][rate] == pytest.approx(expected[scenario][rate]), (scenario, rate)


def test_export_refuses_a_folder_with_files_and_the_release_itself(deflection_release, tmp_path, capsys, monkeypatch):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("x")
    for out, needle in (
        (busy, "is a folder holding files: refusing to overwrite"),
        (deflection_release / "lmms_eval2", "inside the release"),
    ):
        one_line(
            *run_cli(capsys, monkeypatch, "export", "lmms-eval", str(deflection_release), "--out", str(out))[::2],
            needle,
        )
    assert not (deflection_release / "lmms_eval2").exists()


@pytest.mark.parametrize("out", [Path("/dev/null"), None])
def test_export_to_a_file_says_it_is_a_file(deflection_release, tmp_path, capsys, monkeypatch, out):
    """Issue 42 item 22: "--out /dev/null is not an empty folder"."""
    if out is None:
        out = tmp_path / "table.txt"
        out.write_text("x")
    one_line(
        *run_cli(capsys, monkeypatch, "export", "lmms-eval", str(deflection_release), "--out", str(out))[::2],
        f"--out {out} is a file, not a folder: give a new or empty folder",
    )


def _lmms_eval(out: Path, base_url: str, work: Path) -> dict[str, dict[str, object]]:
    """lmms-eval's own command line over two of the exported tasks (two documents each), its
    OpenAI-compatible chat model pointed at ``base_url``: per task, every metric's value."""
    env = {
        **os.environ,
        "OPENAI_API_KEY": "none",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "WANDB_MODE": "disabled",
        "HF_HOME": str(work / "hf"),
    }
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "lmms_eval",
            "--model",
            "openai",
            "--model_args",
            f"model_version=smollm2,base_url={base_url},max_retries=1",
            "--tasks",
            f"{GROUP}_oracle,{GROUP}_parametric",
            "--include_path",
            str(out),
            "--limit",
            "2",
            "--batch_size",
            "1",
            "--output_path",
            str(work / "results"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = [json.loads(p.read_text()) for p in (work / "results").rglob("*results*.json")]
    assert results, list((work / "results").rglob("*"))
    return {
        task: {k.split(",")[0]: v for k, v in cell.items() if "," in k and not k.endswith("_stderr,none")}
        for task, cell in results[0]["results"].items()
        if task.startswith(f"{GROUP}_")
    }


@pytest.fixture
def text_only_tasks(deflection_release, tmp_path, capsys, monkeypatch) -> Path:
    out = tmp_path / "tasks"
    code, said, err = run_cli(
        capsys, monkeypatch, "export", "lmms-eval", str(deflection_release), "--out", str(out), "--text-only"
    )
    assert code == 0 and f"--tasks {GROUP} --include_path {out}" in said, err
    return out


@pytest.mark.slow
def test_lmms_eval_runs_the_exported_tasks_against_the_llama_server(text_only_tasks, llama_server, tmp_path):
    """lmms-eval's own command line, its OpenAI-compatible chat model pointed at the embedded
    llama.cpp server as docs/commands/releases.md starts it (``llama_launch``; SmolLM2 is
    text-only: exported with --text-only, the images dropped). Every request is answered (lmms-eval sends content
    lists, which llama-cpp-python's own server refuses). SmolLM2's answers differ across
    machines: only what the run must produce is checked."""
    scores = _lmms_eval(text_only_tasks, llama_server.base_url, tmp_path)
    for scenario in ("oracle", "parametric"):
        values = scores[f"{GROUP}_{scenario}"]
        assert (values["failed_requests"], values["failed_samples"], values["graded"]) == (0, [], 2), values
        assert set(RATES) <= set(values), values
        assert 0.0 <= values["accuracy"] <= 1.0 and values["accuracy"] + values["deflection"] + values[
            "hallucination"
        ] == pytest.approx(1.0)


@pytest.mark.slow
def test_a_run_whose_requests_all_fail_grades_nothing_and_names_them(text_only_tasks, tmp_path):
    """Issue 42 item 1: no server behind the URL, every request fails: lmms-eval still exits 0,
    and its results grade nothing (no rate), count the failures and name the documents."""
    scores = _lmms_eval(text_only_tasks, f"http://127.0.0.1:{free_port()}/v1", tmp_path)
    for scenario in ("oracle", "parametric"):
        values = scores[f"{GROUP}_{scenario}"]
        assert values["graded"] == 0 and values["failed_requests"] == 2 and len(values["failed_samples"]) == 2, values
        assert all(values[rate] is None for rate in RATES), values
