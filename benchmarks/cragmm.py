"""CRAG-MM (KDD Cup 2025), the benchmark CRUISE (seed 001) reports on: ingested and published
unfiltered, evaluated plain or through CRUISE's answering system."""
from __future__ import annotations

from .benchmark import Benchmark, Evaluation

BENCHMARK = Benchmark(
    name="cragmm",
    title="CRAG-MM public sets (single- and multi-turn) as a validated release, for CRUISE's evaluation",
    paper="001_2a7b350a10561872.txt",
    sources=("cragmm",),
    release="mmcurate.releases.cragmm:KIND",
    curate="mmcurate.flows.cragmm:cragmm",
    evaluation=Evaluation(
        steps="mmcurate.flows.evaluate_cragmm:evaluate_cragmm",
        options=("system", "task", "limit"),
        check="mmcurate.evaluation.cruise:run_options",
        refuse="mmcurate.evaluation.cruise:refuse_unrunnable",
    ),
)
