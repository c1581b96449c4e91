"""Early elimination's counts (the convergence rows and the naive call count) are DeflectionBench's:
they live on its stages' results, not on every stage's, and merge over shards as before."""

from __future__ import annotations

import dataclasses

import pyarrow as pa

import mmcurate.core.config as config
from mmcurate.core.stages import StageResult, merge_results
from mmcurate.gating.elimination import EliminationResult, EliminationStage


class Shards(EliminationStage):
    name = "parametric"

    def run(self, samples, ctx):  # pragma: no cover - merge only
        raise NotImplementedError


def _shard(ids: list[str], retained: list[int], naive: int) -> EliminationResult:
    return EliminationResult(
        stage="parametric",
        kept=pa.table({"sample_id": ids}),
        naive_calls=naive,
        convergence=[
            {"n_models": i + 1, "model": m, "retained": r} for i, (m, r) in enumerate(zip(("a", "b"), retained))
        ],
    )


def test_shards_merge_their_convergence_and_naive_calls():
    merged = Shards().merge([_shard(["s1", "s2"], [2, 1], 4), _shard(["s3"], [1, 0], 2)])
    assert isinstance(merged, EliminationResult) and merged.kept.num_rows == 3
    assert merged.convergence == [
        {"n_models": 1, "model": "a", "retained": 3},
        {"n_models": 2, "model": "b", "retained": 1},
    ]
    assert merged.naive_calls == 6


def test_every_other_stage_result_carries_neither():
    fields = {f.name for f in dataclasses.fields(StageResult)}
    assert not {"convergence", "naive_calls"} & fields
    assert not hasattr(merge_results([StageResult(stage="s", kept=pa.table({"x": [1]}))]), "naive_calls")


def test_benchmark_settings_live_beside_their_benchmark():
    """DeflectionBench's Stage II retrieval and Kestrel's claim gate are not core settings."""
    from mmcurate.benchmarks.deflectionbench import RetrievalConfig
    from mmcurate.benchmarks.shared import ClaimGate

    assert not hasattr(config, "RetrievalConfig") and not hasattr(config, "ClaimGate")
    assert RetrievalConfig().chunk_size == 250 and ClaimGate().max_rounds == 3
