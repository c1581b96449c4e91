"""RefLVQA (seed 004): long-form visual QA from Reddit with sentence-level citations."""
from __future__ import annotations

from .benchmark import Benchmark, Evaluation

BENCHMARK = Benchmark(
    name="reflvqa",
    title="RefLVQA (long-form visual QA with sentence-level citations)",
    paper="004_ab89136aadc415d7.txt",
    sources=("reddit",),
    release="mmcurate.releases.reflvqa:KIND",
    curate="mmcurate.flows.reflvqa:reflvqa",
    recurate="mmcurate.flows.recurate_reflvqa:recurate_reflvqa",
    evaluation=Evaluation(
        steps="mmcurate.flows.evaluate_reflvqa:evaluate_reflvqa",
        options=("settings", "queries", "subset"),
        check="mmcurate.evaluation.reflvqa_settings:run_options",
        refuse="mmcurate.evaluation.reflvqa_subset:refuse_unrunnable",
        plan="mmcurate.planning.bill:reflvqa_evaluation_bill",
    ),
    plan="mmcurate.planning.bill:reflvqa_bill",
    recuration_plan="mmcurate.planning.recuration:reflvqa_recuration",
    judge_review="mmcurate.review.reflvqa_judges:REVIEW",
)
