"""A release's evaluation as an lmms-eval task folder (lmms-eval's published task layout:
a YAML per task, a group YAML, the functions in ``utils.py``).

Each task YAML reads the release's Parquet shards (``dataset_path: parquet`` with
``data_files``), names its functions with lmms-eval's ``!function utils.<name>`` tag and
lists its metrics with their aggregations; ``utils.py`` binds every function to mmcurate's
rule (``evaluation.harness``), so lmms-eval needs mmcurate importable. ``harness.json``
says which benchmark rules and which release values (the seed) the functions use.

Inside a release (``lmms_eval/``, sealed with it) the data paths are relative to the release
folder, so lmms-eval is run from there; ``mmcurate export lmms-eval RELEASE --out DIR``
writes absolute paths, for a folder anywhere. ``text_only`` drops the images from what the
model is sent (a text-only model), and the README and every YAML say so.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from mmcurate.evaluation.harness import (
    FAILED_REPLY,
    FAILED_REQUESTS,
    FAILED_SAMPLES,
    GRADED,
    Harness,
    HarnessTask,
    metric_names,
)

from .errors import ReleaseError
from .reader import DATA_DIR, read_parquet, read_schema
from .versions import parse_version

FOLDER = "lmms_eval"
SETTINGS = "harness.json"
FUNCTIONS = ("doc_to_messages", "doc_to_visual", "doc_to_text", "doc_to_target", "process_results")
# lmms-eval's ``higher_is_better`` of a metric (True unless named): None for a number that is no
# score (POPE's yes ratio, the share of "yes" replies, says how biased the model is either way;
# the counts say what the rates are over)
HIGHER_IS_BETTER: dict[str, bool | None] = {
    "deflection": False,
    "hallucination": False,
    "missing": False,
    "yes_ratio": None,
    GRADED: None,
    FAILED_REQUESTS: False,
    FAILED_SAMPLES: None,
}


class _Function(str):
    """A YAML scalar written with lmms-eval's ``!function`` tag."""


yaml.SafeDumper.add_representer(
    _Function, lambda dumper, value: dumper.represent_scalar("!function", str(value), style="")
)


def group_name(benchmark: str, version: str) -> str:
    """The lmms-eval group of a release; its version must be semantic (it names files)."""
    parse_version(version)
    return f"{benchmark}_v{version.replace('.', '_')}"


def _task_yaml(group: str, task: HarnessTask, data_files: str, text_only: bool) -> dict[str, Any]:
    ident = task.name
    config: dict[str, Any] = {
        "task": f"{group}_{ident}",
        "dataset_path": "parquet",
        "dataset_kwargs": {"data_files": {"test": data_files}},
        "test_split": "test",
        "output_type": "generate_until",
        **({"process_docs": _Function(f"utils.{ident}_process_docs")} if task.keep else {}),
        **{name: _Function(f"utils.{ident}_{name}") for name in FUNCTIONS},
        "generation_kwargs": dict(task.generation),
        "metric_list": [
            {
                "metric": metric,
                "aggregation": _Function(f"utils.{ident}_{metric}"),
                "higher_is_better": HIGHER_IS_BETTER.get(metric, True),
            }
            for metric in metric_names(task)
        ],
        "metadata": {"version": 1.0, "description": task.description, "text_only": text_only},
    }
    return config


def _utils(harness: Harness) -> str:
    lines = [
        '"""lmms-eval functions of the tasks beside this file, each one of mmcurate\'s own rules',
        '(mmcurate.evaluation.harness): lmms-eval must run where mmcurate is importable."""',
        "from pathlib import Path",
        "",
        "from mmcurate.evaluation.harness import load_harness",
        "",
        f'_TASKS = load_harness(Path(__file__).with_name("{SETTINGS}"))',
        "",
    ]
    for task in harness.tasks:
        ident = task.name
        if task.keep:
            lines.append(f'{ident}_process_docs = _TASKS["{ident}"].process_docs')
        lines += [f'{ident}_{name} = _TASKS["{ident}"].{name}' for name in FUNCTIONS]
        lines += [f'{ident}_{metric} = _TASKS["{ident}"].aggregation("{metric}")' for metric in metric_names(task)]
        lines.append("")
    return "\n".join(lines)


def _readme(group: str, harness: Harness, tasks: list[str], relative: bool, text_only: bool) -> str:
    where = (
        "from the release folder (the data paths are relative to it)"
        if relative
        else "from anywhere (the data paths are absolute)"
    )
    run = (
        f"lmms-eval --model openai --model_args model_version=MODEL,base_url=http://HOST:PORT/v1 "
        f"--tasks {group} --include_path {FOLDER if relative else 'THIS_FOLDER'}"
    )
    return "\n".join(
        [
            f"# lmms-eval tasks: {group}",
            "",
            harness.note,
            "",
            *(
                [
                    f"Tasks: {', '.join(f'`{t}`' for t in tasks)} (group `{group}`).",
                    "",
                    f"Run {where}, in an environment where mmcurate and lmms-eval are installed:",
                    "",
                    f"    {run}",
                    "",
                ]
                if tasks
                else []
            ),
            *(
                [
                    "**Text only**: every image is dropped from what the model is sent (exported for a text-only "
                    "model), so the numbers are not the benchmark's multimodal ones.",
                    "",
                ]
                if text_only
                else []
            ),
            *(
                [
                    f"**Failed requests**: a request lmms-eval gave up on (its reply starts `{FAILED_REPLY}`) is never "
                    f"graded. Every rate is over the task's `{GRADED}` documents; `{FAILED_REQUESTS}` counts the others "
                    f"and `{FAILED_SAMPLES}` names them (sample ids). A run whose `{FAILED_REQUESTS}` is not 0 did not "
                    "measure the model on every document.",
                    "",
                    "With mmcurate's embedded llama.cpp server, start it as `python -m mmcurate.models.backends.llama_launch "
                    "--model GGUF --host 127.0.0.1 --port PORT` (llama-cpp-python's own `python -m llama_cpp.server` "
                    "refuses the content lists lmms-eval sends: every request fails).",
                    "",
                ]
                if tasks
                else []
            ),
        ]
    )


def write_lmms_tasks(
    harness: Harness,
    factory: str,
    values: Mapping[str, Any],
    benchmark: str,
    version: str,
    out: Path,
    data: Path | None = None,
    text_only: bool = False,
) -> dict[str, Any]:
    """Write the task folder into ``out`` (created; it must not hold files): ``data`` is the
    release folder for absolute data paths, None for paths relative to the release folder.
    Returns what the manifest records (group, tasks, note, text_only)."""
    out.mkdir(parents=True, exist_ok=True)
    group = group_name(benchmark, version)
    tasks = [f"{group}_{task.name}" for task in harness.tasks]
    base = Path(DATA_DIR) if data is None else data.resolve() / DATA_DIR
    for task in harness.tasks:
        files = (base / f"{task.config}-*.parquet").as_posix()
        (out / f"{group}_{task.name}.yaml").write_text(
            yaml.safe_dump(_task_yaml(group, task, files, text_only), sort_keys=False, allow_unicode=True)
        )
    if tasks:
        (out / f"{group}.yaml").write_text(yaml.safe_dump({"group": group, "task": tasks}, sort_keys=False))
        (out / "utils.py").write_text(_utils(harness))
        (out / SETTINGS).write_text(
            json.dumps({"harness": factory, "release": dict(values), "text_only": text_only}, indent=2, sort_keys=True)
            + "\n"
        )
    (out / "README.md").write_text(_readme(group, harness, tasks, data is None, text_only))
    return {
        "folder": FOLDER,
        "group": group if tasks else None,
        "tasks": tasks,
        "note": harness.note,
        "text_only": text_only,
    }


def harness_values(benchmark: str, version: str, seed: int | None, first: pa.Table) -> dict[str, Any]:
    """The release values a harness reads, as ``harness.json`` keeps them: the evaluation's seed
    and, when the first table has ``dataset`` and ``split`` columns (POPE's probes), its
    (dataset, split) pairs, for benchmarks that report each pair apart."""
    pairs = (
        sorted({(d, s) for d, s in zip(first["dataset"].to_pylist(), first["split"].to_pylist())})
        if {"dataset", "split"} <= set(first.column_names)
        else []
    )
    return {"benchmark": benchmark, "version": version, "seed": seed or 0, "pairs": [list(p) for p in pairs]}


def export_release(release: Any, kind: Any, out: Path, text_only: bool = False) -> dict[str, Any]:
    """``mmcurate export lmms-eval``: the release's task folder in ``out`` (absolute data paths).
    ``release`` is an opened ``reader.Release``, ``kind`` its ``ReleaseKind``. Refused: a kind
    without a harness, an ``out`` holding files, an ``out`` inside the release, a release whose
    version cannot name a group or whose manifest names shards outside it. The folder is written
    beside ``out`` under a temporary name and renamed into place: a write that fails (a name too
    long, no permission, a full disk) leaves no task folder, and says so in one line."""
    if not kind.harness:
        raise ReleaseError(f"{release.benchmark} releases have no lmms-eval tasks")
    group_name(release.benchmark, release.version)  # a version that cannot name a group is refused first
    out = Path(out)
    try:
        if out.resolve().is_relative_to(Path(release.path).resolve()):
            raise ReleaseError(
                f"--out {out} is inside the release: a release is never written into; pick another folder"
            )
        if out.exists() and not out.is_dir():
            raise ReleaseError(f"--out {out} is a file, not a folder: give a new or empty folder")
        if out.exists() and any(out.iterdir()):
            raise ReleaseError(
                f"--out {out} is a folder holding files: refusing to overwrite; give a new or empty folder"
            )
    except OSError as exc:
        raise ReleaseError(f"--out {out}: {exc.strerror or exc}") from None
    shards = release.shard_paths(release.configs[0])
    columns = [c for c in ("dataset", "split") if c in read_schema(shards[0]).names]
    first = pa.concat_tables([read_parquet(path, columns) for path in shards]) if columns else pa.table({})
    values = harness_values(release.benchmark, release.version, release.manifest.seed, first)
    harness = kind.harness(values)
    staging = out.resolve().with_name(f".{out.resolve().name}.tmp-{os.getpid()}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        written = write_lmms_tasks(
            harness,
            kind.harness_factory,
            values,
            release.benchmark,
            release.version,
            staging,
            data=Path(release.path),
            text_only=text_only,
        )
        os.replace(staging, out)  # onto an absent or empty folder
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise ReleaseError(f"--out {out}: cannot write the task folder: {exc.strerror or exc}") from None
    return written
