"""The exported lmms-eval task folder, without lmms-eval (issue 42): the exported functions are
called as lmms-eval calls them (``process_results`` per document, then each metric's
aggregation named in the task YAML), a failed request is never graded in any exported task;
the export's refusals are one line each, and a failed write leaves no folder."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from mmcurate.evaluation.harness import COUNTS, harness_of
from mmcurate.releases.lmms_export import group_name, write_lmms_tasks
from mmcurate.releases.manifest import MANIFEST
from mmcurate.sources.mme import DATASET as MME
from tests.releases.cli_helpers import one_line, run_cli
from tests.releases.release_builders import reseal

# what lmms-eval 0.7.3's openai model answers for a request that failed every retry
FAILED = "[LMMS_EVAL_REQUEST_FAILED after 5 retries] Error code: 500 - {'error': 'Input should be a valid string'}"


class _TaskLoader(yaml.SafeLoader):
    """Reads a task YAML, its ``!function`` tags as their names."""


_TaskLoader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def _utils(folder: Path) -> ModuleType:
    """The folder's ``utils.py``, imported from its file as lmms-eval imports it."""
    spec = importlib.util.spec_from_file_location(f"utils_{folder.name}", folder / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _numbers(folder: Path, task: str, docs: list[dict[str, Any]], replies: list[str]) -> dict[str, Any]:
    """Every metric the task's YAML lists, aggregated over the documents' records as lmms-eval does."""
    config = yaml.load((folder / f"{task}.yaml").read_text(), Loader=_TaskLoader)
    utils = _utils(folder)
    records: dict[str, list] = {}
    for doc, reply in zip(docs, replies):
        for metric, record in getattr(utils, config["process_results"].split(".")[1])(doc, [reply]).items():
            records.setdefault(metric, []).append(record)
    return {
        m["metric"]: getattr(utils, m["aggregation"].split(".")[1])(records[m["metric"]]) for m in config["metric_list"]
    }


def _pope(dataset: str, split: str) -> list[dict[str, Any]]:
    return [
        {
            "sample_id": f"{dataset}-{i}",
            "dataset": dataset,
            "split": split,
            "label": label,
            "image_file": f"img{i // 2}.jpg",
            "question": "Is there a dog in the image?",
            "image": None,
        }
        for i, label in enumerate(("yes", "no", "yes", "no"))
    ]


def _qa(n: int) -> list[dict[str, Any]]:
    return [
        {
            "sample_id": f"q{i}",
            "source": "webqa",
            "question": f"What is shown in picture {i}?",
            "answers": [f"answer {i}"],
            "meta": None,
            "images": [],
            "set": "single_turn",
            "turn": 0,
        }
        for i in range(n)
    ]


# (benchmark, harness factory, release values, task, documents, replies: the last two failed)
CASES = [
    (
        "pope",
        "mmcurate.evaluation.pope.harness:harness",
        {"pairs": [["coco", "random"]]},
        "coco_random",
        _pope("coco", "random"),
        ["Yes, there is a dog.", "No, there is not.", FAILED, FAILED],
    ),
    (
        "mme",
        "mmcurate.evaluation.pope.harness:harness",
        {"pairs": [[MME, "existence"]]},
        f"{MME}_existence",
        _pope(MME, "existence"),
        ["Yes", "No", FAILED, FAILED],
    ),
    (
        "deflectionbench",
        "mmcurate.evaluation.deflectionbench.harness:harness",
        {"seed": 3},
        "oracle",
        _qa(4),
        ["answer 0", "I don't know", FAILED, FAILED],
    ),
    (
        "cragmm",
        "mmcurate.evaluation.cragmm.harness:harness",
        {"seed": 3},
        "single_turn",
        _qa(4),
        ["answer 0", "answer 7", FAILED, FAILED],
    ),
]


@pytest.mark.parametrize("benchmark, factory, values, task, docs, replies", CASES, ids=[c[0] for c in CASES])
def test_a_failed_request_is_never_graded_and_is_counted_and_named(
    tmp_path, benchmark, factory, values, task, docs, replies
):
    """Issue 42 item 1: lmms-eval's failed-request marker read by POPE's rule said "yes", by the
    judge a wrong answer. Every exported task leaves it out of its rates (the rates equal those
    of the answered documents alone), counts it and names its document."""
    values = {"benchmark": benchmark, "version": "1.0.0", "seed": 0, "pairs": [], **values}
    out = tmp_path / benchmark
    write_lmms_tasks(harness_of(factory, values), factory, values, benchmark, "1.0.0", out)
    name = f"{group_name(benchmark, '1.0.0')}_{task}"
    with_failures = _numbers(out, name, docs, replies)
    answered = _numbers(out, name, docs[:2], replies[:2])
    own = [metric for metric in answered if metric not in COUNTS]
    assert len(own) >= 3 and {m: with_failures[m] for m in own} == {m: answered[m] for m in own}
    assert [with_failures.get(m) for m in COUNTS] == [2, 2, [docs[2]["sample_id"], docs[3]["sample_id"]]]
    assert [answered.get(m) for m in COUNTS] == [2, 0, []]
    all_failed = _numbers(out, name, docs[2:], replies[2:])
    assert [all_failed[m] for m in COUNTS] == [0, 2, [docs[2]["sample_id"], docs[3]["sample_id"]]]
    assert [all_failed[m] for m in own] == [None] * len(own)  # no number from no answer
    readme = (out / "README.md").read_text()
    assert "`failed_requests`" in readme and "llama_launch" in readme


def test_higher_is_better_says_what_each_metric_is(tmp_path):
    """Issue 42 item 23: POPE's yes ratio is no score (a bias either way) and the counts are no
    scores: lmms-eval reads ``higher_is_better: null`` for them."""
    factory, values = "mmcurate.evaluation.pope.harness:harness", {"pairs": [["coco", "random"]], "seed": 0}
    write_lmms_tasks(harness_of(factory, values), factory, values, "pope", "1.0.0", tmp_path / "t")
    config = yaml.load((tmp_path / "t" / "pope_v1_0_0_coco_random.yaml").read_text(), Loader=_TaskLoader)
    assert {m["metric"]: m["higher_is_better"] for m in config["metric_list"]} == {
        "accuracy": True,
        "precision": True,
        "recall": True,
        "f1": True,
        "yes_ratio": None,
        "graded": None,
        "failed_requests": False,
        "failed_samples": None,
    }


# ---------------------------------------------------------------------------- item 17: refusals
def _export(capsys, monkeypatch, release: Path, out: Path) -> tuple[int, str]:
    code, _, err = run_cli(capsys, monkeypatch, "export", "lmms-eval", str(release), "--out", str(out))
    return code, err


def test_an_out_name_too_long_is_one_line_and_leaves_nothing(capsys, monkeypatch, deflection_release, tmp_path):
    out = tmp_path / ("x" * 300)
    one_line(*_export(capsys, monkeypatch, deflection_release, out), "--out", "File name too long")
    assert list(tmp_path.iterdir()) == []


def test_a_write_that_fails_midway_leaves_no_task_folder(capsys, monkeypatch, deflection_release, tmp_path):
    """The folder is written under a temporary name: a write refused after some files leaves neither
    a half folder under ``--out`` nor the temporary one."""
    real = Path.write_text

    def refuse_utils(self: Path, *args: Any, **kwargs: Any) -> int:
        if self.name == "utils.py":
            raise OSError(28, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", refuse_utils)
    one_line(*_export(capsys, monkeypatch, deflection_release, tmp_path / "tasks"), "No space left on device")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def resealed(tmp_path, deflection_release):
    """A writable copy of the release whose manifest an edit then seals again (so it verifies)."""
    target = tmp_path / "releases" / "deflectionbench" / "1.0.0"
    shutil.copytree(deflection_release, target)

    def edit(**entries: Any) -> Path:
        reseal(target, {**json.loads((target / MANIFEST).read_text()), **entries})
        return target

    return edit


def test_a_version_that_cannot_name_a_group_is_one_line(capsys, monkeypatch, resealed, tmp_path):
    release = resealed(version="1/x")
    one_line(*_export(capsys, monkeypatch, release, tmp_path / "tasks"), "'1/x'", "semantic version")
    assert not (tmp_path / "tasks").exists()


@pytest.mark.parametrize("shard", ["/etc/passwd", "../../../outside.parquet"])
def test_a_shard_outside_the_release_is_refused(capsys, monkeypatch, resealed, tmp_path, shard):
    (tmp_path / "outside.parquet").write_bytes(b"not parquet")
    release = resealed(shards={"test": [shard]})
    one_line(*_export(capsys, monkeypatch, release, tmp_path / "tasks"), repr(shard), "outside the release")
    assert not (tmp_path / "tasks").exists()
