"""Each benchmark's module (``benchmarks/<name>.py``) opens with the list of its code, layer by
layer: the page a newcomer reads first. The list names exactly the modules of the benchmark's
subpackages (``<layer>/<name>/*.py``), so a module added, moved or removed fails here until the
list says so."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

from mmcurate.benchmarks import BENCHMARKS

REPO = Path(__file__).resolve().parents[2]
FOLDERS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
LAYERS = [folder for package, folder in FOLDERS.items() if package.count(".") == 1]


def listed(doc: str, name: str) -> set[str]:
    """``layer/name/module.py`` of every module the docstring's layer lines name: a line
    ``- ``layer/name/``: ``a.py`` (...), ``b.py``...`` and its indented continuation."""
    found = set()
    for item in re.split(r"\n- ", doc)[1:]:
        head = re.match(rf"``(\w+)/{name}/``:", item)
        if head:
            found |= {f"{head.group(1)}/{name}/{module}.py" for module in re.findall(r"``(\w+)\.py``", item)}
    return found


def on_disk(name: str) -> set[str]:
    return {
        f"{layer}/{name}/{path.name}"
        for layer in LAYERS
        for path in (REPO / layer / name).glob("*.py")
        if path.name != "__init__.py"
    }


@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_the_benchmark_module_lists_its_code_layer_by_layer(name):
    doc = sys.modules[BENCHMARKS[name].config.__module__].__doc__
    assert on_disk(name), f"{name} has no subpackage in any layer"
    assert listed(doc, name) == on_disk(name)


def test_a_module_left_out_of_the_list_is_seen():
    doc = sys.modules[BENCHMARKS["pope"].config.__module__].__doc__
    assert listed(doc.replace("``kestrel.py``", "``kestrel``"), "pope") == on_disk("pope") - {
        "evaluation/pope/kestrel.py"
    }
