"""Evaluating one model on a release, as the release's paper reports it.

The release's benchmark decides how (``Benchmark.evaluation`` in ``mmcurate.benchmarks``):
DeflectionBench's four scenarios (``evaluate_deflectionbench``), RefLVQA's grid of RAG settings with
citations (``evaluate_reflvqa``). This flow is the one entry point for deployments: it
checks the options against the benchmark's and runs the benchmark's evaluation flow.
"""
from __future__ import annotations

from typing import Any

from prefect import flow

from mmcurate.benchmarks import get
from mmcurate.core.config import bundled_config
from mmcurate.releases.reader import open_release

DEMO_CONFIG = bundled_config("demo.yaml")


@flow(name="evaluate", log_prints=True)
def evaluate_release(release: str, model: str, config: str = str(DEMO_CONFIG), out: str | None = None,
                     allow_incomplete: bool = False, options: dict[str, Any] | None = None) -> str:
    """Evaluate ``model`` on ``release`` with the options of its benchmark's evaluation
    (parameter names, e.g. ``{"scenarios": ["oracle"]}``); returns the output folder."""
    benchmark = get(open_release(release).benchmark)
    arguments = benchmark.evaluation.arguments(benchmark.name, options or {}, {}) if benchmark.evaluation else {}
    return benchmark.evaluation_flow()(release=release, model=model, config=config, out=out,
                                       allow_incomplete=allow_incomplete, **arguments)
