"""Every part of every benchmark is an object its owning layer registered (``benchmarks.parts``),
never an import path resolved at run time, which import-linter could not see: the registry names
no code by string, each part sits in the layer its kind belongs to, and the registry itself
imports only core."""

from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path

import pytest

import mmcurate.evaluation.builtin  # noqa: F401  the layers' own parts, registered
import mmcurate.flows.builtin  # noqa: F401
import mmcurate.planning.builtin  # noqa: F401
import mmcurate.releases.builtin  # noqa: F401
import mmcurate.review.builtin  # noqa: F401
from mmcurate.benchmarks import BENCHMARKS, Benchmark, Evaluation, register_part
from mmcurate.benchmarks.parts import PARTS, registered_adapters, registered_parts
from mmcurate.core.errors import ConfigError

# the layer that owns each kind of part
LAYERS = {
    "release": "mmcurate.releases",
    "curate": "mmcurate.flows",
    "recurate": "mmcurate.flows",
    "evaluate": "mmcurate.flows",
    "plan": "mmcurate.planning",
    "recuration_plan": "mmcurate.planning",
    "evaluation_plan": "mmcurate.planning",
    "evaluation_check": "mmcurate.evaluation",
    "evaluation_refuse": "mmcurate.evaluation",
    "judge_review": "mmcurate.review",
}


def resolves_to_code(value: object) -> bool:
    """A string that names a dotted module, or ``module:attribute``, that can be imported (a plain
    word such as a source's name is data, even when a package of that name is installed)."""
    if not isinstance(value, str) or " " in value or not (":" in value or "." in value):
        return False
    module, _, attribute = value.partition(":")
    try:
        found = importlib.import_module(module)
    except (ImportError, ValueError, TypeError):
        return False
    return not attribute or hasattr(found, attribute)


def _fields(obj: object) -> list[tuple[str, object]]:
    return [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)]  # type: ignore[arg-type]


def test_every_kind_of_part_has_a_layer():
    assert set(PARTS) == set(LAYERS)


def test_the_registry_names_no_code_by_string():
    """Walk every benchmark, its evaluation, every registered part (and the fields of a part that
    is a dataclass, such as a release kind's harness) and adapter: no value is a string that
    resolves to importable code."""
    found = []
    for benchmark in BENCHMARKS.values():
        for name, value in _fields(benchmark) + (_fields(benchmark.evaluation) if benchmark.evaluation else []):
            values = value.values() if isinstance(value, dict) else value if isinstance(value, tuple) else [value]
            found += [f"{benchmark.name}.{name}: {v}" for v in values if resolves_to_code(v)]
    for (name, part), value in registered_parts().items():  # a part, and the fields of one that is a dataclass
        inner = _fields(value) if dataclasses.is_dataclass(value) else []
        found += [
            f"{name}.{part}{'.' + field if field else ''}: {v}"
            for field, v in [("", value), *inner]
            if resolves_to_code(v)
        ]
    found += [f"adapter {name}: {cls}" for name, (_, cls) in registered_adapters().items() if resolves_to_code(cls)]
    assert found == []


def test_the_walk_sees_a_path_string():
    assert resolves_to_code("mmcurate.releases.pope.draft:KIND") and not resolves_to_code("pope")
    with pytest.raises(ConfigError, match="register the object itself, not its import path"):
        register_part("pope", "release")("mmcurate.releases.pope.draft:KIND")


@pytest.mark.parametrize(("benchmark", "part"), sorted(registered_parts()), ids=lambda v: v)
def test_every_registered_part_sits_in_its_layer(benchmark, part):
    value = registered_parts()[(benchmark, part)]
    module = getattr(value, "__module__", None) or type(value).__module__
    if part == "curate":  # a Prefect flow: where its function is defined
        module = value.fn.__module__
    if part in ("release", "judge_review"):  # an instance: the module that registered it holds it
        module = next(
            m
            for m in list(importlib.sys.modules.values())
            if getattr(m, "__name__", "").startswith(LAYERS[part]) and value in vars(m).values()
        )
        module = module.__name__
    assert module.startswith(f"{LAYERS[part]}."), f"{benchmark}.{part} is defined in {module}, not {LAYERS[part]}"


def test_every_built_in_benchmark_has_its_parts():
    for name, benchmark in BENCHMARKS.items():
        parts = {part for (b, part) in registered_parts() if b == name}
        assert "release" in parts and ("curate" in parts) == benchmark.curated
        assert ("evaluate" in parts) == (benchmark.evaluation is not None)
        assert isinstance(benchmark, Benchmark) and (
            benchmark.evaluation is None or isinstance(benchmark.evaluation, Evaluation)
        )


def test_the_registry_imports_only_core_not_even_for_annotations():
    folder = Path(__file__).resolve().parents[2] / "benchmarks"
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("mmcurate."):
                if not node.module.startswith(("mmcurate.core", "mmcurate.benchmarks")):
                    found.append(f"{path.name}:{node.lineno}: {node.module}")
    assert found == []


def test_a_flow_file_loaded_again_as_a_script_registers_nothing_new(tmp_path):
    """``prefect deploy`` loads an entrypoint's file as a script: its decorators run a second time
    on a copy of the same definitions, which is not a second registration; another definition is."""
    import runpy

    from mmcurate.benchmarks import registered_part
    from mmcurate.flows.pope import curate

    runpy.run_path(curate.__file__, run_name="__prefect_loader__")
    assert registered_part("pope", "curate") is curate.pope
    with pytest.raises(ConfigError, match="benchmark 'pope' already has its curate registered"):
        register_part("pope", "curate")(lambda: None)
