"""VLM-DeflectionBench (seed 003): Algorithm 1 over KB-VQA sources, four-scenario evaluation."""
from __future__ import annotations

from .benchmark import Benchmark, Evaluation

BENCHMARK = Benchmark(
    name="deflectionbench",
    title="VLM-DeflectionBench (Algorithm 1) and publish a validated release",
    paper="003_26e6cf169dd21fb6.txt",
    sources=("infoseek", "evqa", "webqa", "mmdocrag", "mragbench", "viquae"),
    release="mmcurate.releases.deflection:KIND",
    curate="mmcurate.flows.deflectionbench:deflectionbench",
    recurate="mmcurate.flows.recurate_deflectionbench:recurate_deflectionbench",
    evaluation=Evaluation(
        steps="mmcurate.flows.evaluate_deflectionbench:evaluate_deflectionbench",
        options=("scenarios", "n_negatives", "abstention", "strictness_sweep", "modality_analysis", "system"),
        check="mmcurate.evaluation.scenarios:run_options",
    ),
    plan="mmcurate.planning.bill:deflection_bill",
    recuration_plan="mmcurate.planning.recuration:deflection_recuration",
    judge_review="mmcurate.review.deflection_judges:REVIEW",
)
