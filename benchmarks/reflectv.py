"""ReflectV (MIRROR, seed 002): reflective, visually grounded multi-turn trajectories, a training set."""
from __future__ import annotations

from .benchmark import Benchmark

BENCHMARK = Benchmark(
    name="reflectv",
    title="ReflectV (reflective, visually grounded multi-turn trajectories, MIRROR)",
    paper="002_6b46cea6506e7b47.txt",
    sources=("gqa", "textvqa", "docvqa", "chartqa", "fire"),
    release="mmcurate.releases.reflectv:KIND",
    curate="mmcurate.flows.reflectv:reflectv",
    recurate="mmcurate.flows.recurate_reflectv:recurate_reflectv",
    recuration_plan="mmcurate.planning.recuration:reflectv_recuration",
    plan="mmcurate.planning.bill:reflectv_bill",
)
