"""Evaluating one model on a release, as the release's paper reports it: the one evaluation flow.

    open       the release, its benchmark's evaluation (``Benchmark.evaluation`` in
               ``mmcurate.benchmarks``; its parts registered on importing ``flows.builtin``
               and ``evaluation.builtin``) and the options it takes, checked; the settings with
               the model; refused before any call when the model or the configuration cannot
               run it (POPE: a model that sees; Kestrel: a grounding agent; CRUISE: its section)
    folder     where the run writes: one folder per model and answering system
    steps      the benchmark's evaluation: DeflectionBench's four scenarios
               (``deflectionbench/evaluate.py``), RefLVQA's grid of RAG settings with citations
               (``reflvqa/evaluate.py``), CRAG-MM plain or through CRUISE (``cragmm/evaluate.py``),
               POPE plain or through Kestrel (``pope/evaluate.py``): answer, grade, write the tables

The command line checks the same options before Prefect starts; a deployment run has only
this flow before it.
"""

from __future__ import annotations

from typing import Any

from prefect import flow

import mmcurate.evaluation.builtin  # noqa: F401  registers the option checks and refusals
import mmcurate.flows.builtin  # noqa: F401  registers each benchmark's evaluation steps
from mmcurate.benchmarks import get
from mmcurate.core.config import load_config
from mmcurate.evaluation.runs import PLAIN, evaluation_folder
from mmcurate.flows import DEMO_CONFIG
from mmcurate.releases.reader import open_release


@flow(name="evaluate", log_prints=True)
def evaluate_release(
    release: str,
    model: str,
    config: str = str(DEMO_CONFIG),
    out: str | None = None,
    allow_incomplete: bool = False,
    options: dict[str, Any] | None = None,
) -> str:
    """Evaluate ``model`` on ``release`` with the options of its benchmark's evaluation
    (parameter names, e.g. ``{"scenarios": ["oracle"]}``); returns the output folder."""
    bench = open_release(release)
    evaluation = get(bench.benchmark).required_evaluation()
    arguments = evaluation.arguments(bench.benchmark, options or {}, {})
    settings = load_config(config)
    name = settings.add_model(model).name
    evaluation.refuse_unrunnable(bench.benchmark, settings, name, arguments)  # before any call
    target = evaluation_folder(settings, bench.benchmark, bench.version, name, out, arguments.get("system", PLAIN))
    evaluation.steps_function(bench.benchmark)(bench, settings, name, target, allow_incomplete, **arguments)
    return str(target)
