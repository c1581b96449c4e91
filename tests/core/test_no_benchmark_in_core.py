"""core/ is shared by every benchmark: it names none of them (each brings its own settings
through ``benchmarks.register``)."""

from __future__ import annotations

import re
from pathlib import Path

from mmcurate.benchmarks import BENCHMARKS

CORE = Path(__file__).resolve().parents[2] / "core"


def test_no_core_module_names_a_benchmark():
    names = re.compile("|".join(sorted(BENCHMARKS) + ["cruise"]))
    found = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(CORE.glob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if names.search(line)
    ]
    assert found == []
