"""Every benchmark mmcurate knows, by name: adding one is a module beside this one and a line
here, or a ``register`` call from a package of its own (its parts: ``parts.register_part``)."""

from __future__ import annotations

from mmcurate.core.config import register_sections
from mmcurate.core.errors import ConfigError

from . import cragmm, deflectionbench, pope, reflectv, reflvqa
from .benchmark import Benchmark

BENCHMARKS: dict[str, Benchmark] = {}


def register(benchmark: Benchmark) -> None:
    """Make ``benchmark`` known to every command and flow, and its settings to the config."""
    if BENCHMARKS.get(benchmark.name, benchmark) is not benchmark:
        raise ConfigError(f"benchmark {benchmark.name!r} is already registered")
    evaluation = {
        **({benchmark.name: benchmark.evaluation_config} if benchmark.evaluation_config else {}),
        **benchmark.evaluation_sections,
    }
    register_sections({benchmark.name: benchmark.config, **benchmark.sections}, evaluation)
    BENCHMARKS[benchmark.name] = benchmark


for _module in (deflectionbench, reflvqa, reflectv, cragmm, pope):
    register(_module.BENCHMARK)


def get(name: str) -> Benchmark:
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise ConfigError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}") from None


def curated() -> list[Benchmark]:
    """The benchmarks mmcurate curates (``mmcurate run <name>``), in registry order."""
    return [b for b in BENCHMARKS.values() if b.curated]
