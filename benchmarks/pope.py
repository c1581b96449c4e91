"""POPE (object-hallucination probes), as Kestrel (seed 000) evaluates on it: published POPE
files or probes built from object annotations; and MME's hallucination subtasks (existence,
count, position, color), Kestrel's MME-Hallucination, read as probes of the same release (dataset
``mme``, the subtask as the split) and scored by MME's score beside POPE's metrics. Evaluated
plain or through Kestrel's loop."""
from __future__ import annotations

from .benchmark import Benchmark, Evaluation

BENCHMARK = Benchmark(
    name="pope",
    title="POPE and MME-Hallucination probes (object-hallucination yes/no questions; published files, or built "
          "from object annotations)",
    paper="000_2a76f793a2e194d6.txt",
    sources=("pope", "pope_objects", "mme"),
    release="mmcurate.releases.pope:KIND",
    curate="mmcurate.flows.pope:pope",
    evaluation=Evaluation(
        steps="mmcurate.flows.evaluate_pope:evaluate_pope",
        options=("system",),
        check="mmcurate.evaluation.pope:run_options",
        refuse="mmcurate.evaluation.pope:refuse_unrunnable",
    ),
)
