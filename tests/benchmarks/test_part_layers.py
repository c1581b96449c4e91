"""The registry names a benchmark's parts by "module:attr" strings, loaded when used, which
import-linter cannot see (pyproject.toml's [tool.importlinter]). Each string must name an
importable module of the layer its part belongs to: a flow or its steps in flows/, a plan in planning/, ..."""
from __future__ import annotations

import dataclasses
import importlib

import pytest

from mmcurate.benchmarks import BENCHMARKS, Benchmark, Evaluation

# the layer of every part a Benchmark or its Evaluation names by path
LAYERS = {
    (Benchmark, "release"): "mmcurate.releases",
    (Benchmark, "curate"): "mmcurate.flows",
    (Benchmark, "recurate"): "mmcurate.flows",
    (Benchmark, "plan"): "mmcurate.planning",
    (Benchmark, "recuration_plan"): "mmcurate.planning",
    (Benchmark, "judge_review"): "mmcurate.review",
    (Evaluation, "steps"): "mmcurate.flows",
    (Evaluation, "check"): "mmcurate.evaluation",
    (Evaluation, "plan"): "mmcurate.planning",
    (Evaluation, "refuse"): "mmcurate.evaluation",
}


def _path_fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls) if f.type in ("str | None", "str") and f.name not in ("name", "title", "paper")}


def test_every_part_path_has_a_layer():
    assert {(cls, name) for cls in (Benchmark, Evaluation) for name in _path_fields(cls)} == set(LAYERS)


def _parts():
    for benchmark in BENCHMARKS.values():
        for owner in (benchmark, benchmark.evaluation):
            for (cls, name), layer in LAYERS.items():
                if isinstance(owner, cls) and getattr(owner, name) is not None:
                    yield f"{benchmark.name}.{name}", getattr(owner, name), layer


@pytest.mark.parametrize(("part", "path", "layer"), list(_parts()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_part_path_names_a_module_of_its_layer(part, path, layer):
    module, _, attribute = path.partition(":")
    assert module.startswith(f"{layer}."), f"{part}: {module} is not in {layer}"
    assert attribute and hasattr(importlib.import_module(module), attribute), f"{part}: {path} does not load"


def test_the_registry_imports_only_core_not_even_for_annotations():
    import ast
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "benchmarks"
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("mmcurate."):
                if not node.module.startswith(("mmcurate.core", "mmcurate.benchmarks")):
                    found.append(f"{path.name}:{node.lineno}: {node.module}")
    assert found == []
