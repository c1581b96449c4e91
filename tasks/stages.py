"""The one task that runs any curation stage (``core.stages.Stage``) on the flow's task runner.

``run_stage`` cuts the sample table into shards of ``task_runner.shard_size`` rows (one shard
for a stage that compares samples across the table), maps ``stage-shard`` over them on the
configured runner (threads, Dask or Ray workers), spills each shard's decisions to a Parquet
ledger part under ``workdir/runs/<run id>/`` (so decisions do not pile up in memory or
travel between workers), merges the shard results and reports the model calls as an
artifact and in the log, one line per step and model with the counts the release's card shows
(``models.accounting``). Long model batches log their progress (requests answered / planned,
in about ten steps; a request is a call or a cache hit) on the task run, which the command
line shows. Model calls are made resumable by the
response cache, not by Prefect result caching: a rerun after a crash re-enters the stage
and every finished call is a cache hit.
"""
from __future__ import annotations

import pyarrow as pa
from prefect import get_run_logger, task, unmapped
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE

from mmcurate.core.config import Settings
from mmcurate.core.images import ImageStore
from mmcurate.core.interrupt import request_stop
from mmcurate.core.plural import counted
from mmcurate.core.stages import Stage, StageContext, StageResult, merge_results, shards
from mmcurate.judging.session import open_models

from .models import prefect_secret


@task(name="stage-shard", cache_policy=NO_CACHE)
def run_shard(stage: Stage, samples: pa.Table, index: int, settings: Settings, run_id: str) -> StageResult:
    store = ImageStore(settings.workdir / "images")
    logger = get_run_logger()  # bound to this task run: usable from the model layer's threads

    def progress(step: str, model: str, answered: int, planned: int) -> None:
        logger.info(f"{step} {model}: {answered}/{counted(planned, 'request')} answered")

    with open_models(settings, store, prefect_secret, progress) as models:
        result = stage.run(samples, StageContext(settings, run_id, store, models))
        result.calls = models.counter.rows()
    part = settings.workdir / "runs" / run_id / "ledger" / f"{stage.name}-{index:05d}.parquet"
    return result.spill(part)


def run_stage(stage: Stage, samples: pa.Table, settings: Settings, run_id: str) -> StageResult:
    """Run ``stage`` per shard on the flow's task runner and merge (see the module docstring)."""
    parts = shards(samples, settings.task_runner.shard_size) if stage.shardable else [samples]
    futures = run_shard.with_options(task_run_name=f"{stage.name}-{{index}}").map(
        unmapped(stage), parts, list(range(len(parts))), unmapped(settings), unmapped(run_id))
    try:
        done = futures.result()
    except Exception:
        raise
    except BaseException:  # Ctrl-C or SIGTERM while shards run: their model calls stop at once
        request_stop()
        raise
    result = merge_results(done)
    if result.calls:
        create_table_artifact(key=f"{stage.name}-calls", table=result.calls,
                              description=f"{stage.name}: model calls made and cache hits, per model")
        logger = get_run_logger()
        for row in result.calls:  # the rows the card's calls table is made of
            logger.info(f"{row['stage']} {row['model']}: {counted(row['calls'], 'model call')}, "
                        f"{counted(row['cache_hits'], 'cache hit')}, {row['failures']} failed")
    return result
