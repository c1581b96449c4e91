"""What Algorithm 1's early elimination (seed 003) adds to a stage's result, DeflectionBench's
alone: Stage I (``parametric``) and Stage III (``annotation.deflectionbench.oracle``) ask their
models one after another and stop asking about a sample once it is settled, so their results
also carry the calls the naive algorithm would have made and, for Stage I, how many samples
remain as models are added (the card's calls table and convergence figure)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from mmcurate.core.stages import Stage, StageResult, merge_results


@dataclass(kw_only=True)
class EliminationResult(StageResult):
    convergence: list[dict] = field(default_factory=list)  # {n_models, model, retained}
    naive_calls: int = 0  # calls the naive algorithm makes (no early elimination)


class EliminationStage(Stage):
    """A stage whose shard results are ``EliminationResult``s: merged with their counts summed."""

    def merge(self, results: list[StageResult]) -> EliminationResult:
        merged = merge_results(results)
        shards = [r for r in results if isinstance(r, EliminationResult)]
        retained: dict[tuple[int, str], int] = {}
        for result in shards:
            for row in result.convergence:
                key = (row["n_models"], row["model"])
                retained[key] = retained.get(key, 0) + row["retained"]
        return EliminationResult(
            **{f.name: getattr(merged, f.name) for f in fields(StageResult)},
            convergence=[{"n_models": n, "model": m, "retained": v} for (n, m), v in sorted(retained.items())],
            naive_calls=sum(r.naive_calls for r in shards),
        )
