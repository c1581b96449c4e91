"""Every benchmark mmcurate knows, by name: adding one is a module beside this one and a line here."""
from __future__ import annotations

from mmcurate.core.errors import ConfigError

from . import cragmm, deflectionbench, pope, reflectv, reflvqa
from .benchmark import Benchmark

BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in (
    deflectionbench.BENCHMARK,
    reflvqa.BENCHMARK,
    reflectv.BENCHMARK,
    cragmm.BENCHMARK,
    pope.BENCHMARK,
)}


def get(name: str) -> Benchmark:
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise ConfigError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}") from None


def curated() -> list[Benchmark]:
    """The benchmarks mmcurate curates (``mmcurate run <name>``), in registry order."""
    return [b for b in BENCHMARKS.values() if b.curate]
