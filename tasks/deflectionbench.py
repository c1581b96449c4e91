"""Thin Prefect tasks around the DeflectionBench stages: one library call each.

Model calls are made resumable by the response cache, not by Prefect result caching:
a rerun after a crash re-enters the stage and every finished call is a cache hit.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from prefect import task, unmapped
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE

from mmcurate.annotation.encoders import image_encoder, text_encoder
from mmcurate.annotation.kb import load_kb
from mmcurate.annotation.mining import mine_image_negatives, mine_text_negatives
from mmcurate.annotation.oracle import oracle_filter
from mmcurate.annotation.pairing import pair_knowledge
from mmcurate.annotation.rerank import reranker
from mmcurate.core.config import Settings
from mmcurate.core.images import ImageStore
from mmcurate.core.stages import StageResult
from mmcurate.gating.parametric import parametric_gate

from .models import open_models


@dataclass
class StageRun:
    """A stage's result plus what the run needs to explain it (calls, judge, components)."""

    result: StageResult
    calls: list[dict] = field(default_factory=list)
    judge: str | None = None
    components: dict[str, str] = field(default_factory=dict)


def shards(table: pa.Table, size: int) -> list[pa.Table]:
    """Consecutive slices of at most ``size`` rows (at least one, possibly empty)."""
    return [table.slice(start, size) for start in range(0, table.num_rows, size)] or [table]


def _merge_calls(rows: list[dict]) -> list[dict]:
    merged: dict[tuple[str, str], dict] = {}
    for row in rows:
        key = (row["stage"], row["model"])
        into = merged.setdefault(key, {"stage": row["stage"], "model": row["model"],
                                       "calls": 0, "cache_hits": 0, "failures": 0})
        for name in ("calls", "cache_hits", "failures"):
            into[name] += row[name]
    return [merged[key] for key in sorted(merged)]


def merge_runs(runs: list[StageRun]) -> StageRun:
    """One stage's result over all shards, as if it had run on the whole table."""
    first = runs[0].result
    retained: dict[tuple[int, str], int] = {}
    for run in runs:
        for row in run.result.convergence:
            key = (row["n_models"], row["model"])
            retained[key] = retained.get(key, 0) + row["retained"]
    result = StageResult(
        stage=first.stage,
        kept=pa.concat_tables([r.result.kept for r in runs]),
        decisions=[d for r in runs for d in r.result.decisions],
        convergence=[{"n_models": n, "model": m, "retained": v} for (n, m), v in sorted(retained.items())],
        naive_calls=sum(r.result.naive_calls for r in runs),
        requests=sum(r.result.requests for r in runs),
        run_id=first.run_id,
    )
    return StageRun(result, _merge_calls([row for r in runs for row in r.calls]), runs[0].judge, runs[0].components)


def per_shard(stage, samples: pa.Table, settings: Settings, run_id: str) -> StageRun:
    """Run a model stage on shards of ``settings.task_runner.shard_size`` samples in parallel
    on the flow's task runner (threads, Dask or Ray workers), then merge."""
    futures = stage.map(shards(samples, settings.task_runner.shard_size), unmapped(settings), unmapped(run_id))
    return merge_runs(futures.result())


def _store(settings: Settings) -> ImageStore:
    return ImageStore(settings.workdir / "images")


def _report_calls(key: str, rows: list[dict]) -> None:
    if rows:
        create_table_artifact(key=key, table=rows, description="model calls made and cache hits, per model")


@task(name="stage-i-parametric-gating", cache_policy=NO_CACHE)
def gate_parametrically(samples: pa.Table, settings: Settings, run_id: str) -> StageRun:
    with open_models(settings, _store(settings)) as models:
        result = parametric_gate(samples, models.pool, models.judge, settings.deflectionbench.gating, run_id)
        run = StageRun(result, models.counter.rows(), models.judge.name)
    _report_calls("deflectionbench-stage-i-calls", run.calls)
    return run


@task(name="stage-ii-knowledge-pairing", cache_policy=NO_CACHE)
def pair_with_knowledge(samples: pa.Table, settings: Settings, run_id: str) -> StageRun:
    """Source negatives where a source ships them; otherwise mined text and image negatives.
    Image negatives come from each source's own image pool."""
    cfg = settings.deflectionbench.retrieval
    store = _store(settings)
    index_dir = settings.workdir / "indexes"
    needs = samples.filter(pc.equal(pc.list_value_length(samples["negative_contexts"]), 0))
    mined_text = mine_text_negatives(needs, load_kb(cfg.kb, cfg.kb_limit), cfg, index_dir, store) if needs.num_rows else {}
    mined_images: dict = {}
    for source in sorted(set(needs["source"].to_pylist())):
        group = needs.filter(pc.equal(needs["source"], source))
        mined_images.update(mine_image_negatives(group, store, cfg, index_dir))
    components = {
        "text_encoder": text_encoder(cfg.text_encoder).name,
        "image_encoder": image_encoder(cfg.image_encoder).name,
        "reranker": reranker(cfg.reranker).name,
        "chunking": f"{cfg.chunk_size} {cfg.chunk_unit}, overlap {cfg.chunk_overlap}, sentence boundaries",
        "knowledge_base": cfg.kb,
    }
    return StageRun(pair_knowledge(samples, mined_text, mined_images, run_id), components=components)


@task(name="stage-iii-quality-control", cache_policy=NO_CACHE)
def check_with_oracle(samples: pa.Table, settings: Settings, run_id: str) -> StageRun:
    cfg = settings.deflectionbench
    with open_models(settings, _store(settings)) as models:
        result = oracle_filter(samples, models.pool, models.judge, cfg.gating.pool, cfg.k_min, run_id)
        run = StageRun(result, models.counter.rows(), models.judge.name)
    _report_calls("deflectionbench-stage-iii-calls", run.calls)
    return run
