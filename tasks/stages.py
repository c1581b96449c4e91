"""The one task that runs any curation stage (``core.stages.Stage``) on the flow's task runner.

``run_stage`` cuts the sample table into shards of ``task_runner.shard_size`` rows (one shard
for a stage that is not ``shardable``), maps ``stage-shard`` over them on the
configured runner (threads, Dask or Ray workers), spills each shard's decisions to a Parquet
ledger part under ``workdir/runs/<run id>/`` (so decisions do not pile up in memory or
travel between workers), merges the shard results and reports the model calls as an
artifact and in the log, one line per step and model with the counts the release's card shows
(``models.accounting``). Long model batches log their progress (requests answered / planned,
in about ten steps; a request is a call or a cache hit) on the task run, which the command
line shows. Given a spilled table (``core.tables.SpilledTable``: a streamed run), it reads and
runs the stage on ``rows`` samples at a time and spills each such shard's kept rows to
``workdir/runs/<run id>/kept/``, so the result's ``kept`` is a spilled table too; a stage that
is ``pool_wide`` gets the whole table at once (only the columns it ``reads``, its kept rows
then picked from the full rows by sample id). Model calls are made resumable by the
response cache, not by Prefect result caching: a rerun after a crash re-enters the stage
and every finished call is a cache hit.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from prefect import get_run_logger, task, unmapped
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE

from mmcurate.core.config import Settings
from mmcurate.core.interrupt import request_stop
from mmcurate.core.plural import counted
from mmcurate.core.stages import Stage, StageContext, StageResult, shards
from mmcurate.core.tables import SpilledTable, spill_chunks, write_table
from mmcurate.judging.session import open_models

from .models import prefect_secret


@task(name="stage-shard", cache_policy=NO_CACHE)
def run_shard(stage: Stage, samples: pa.Table, index: int, settings: Settings, run_id: str) -> StageResult:
    """``stage`` on one shard, where the runner puts it (this process, or a worker with its own
    copy of the workdir). Its decisions are spilled to a ledger part. With a workdir in an
    object store, the vector indexes published there are fetched first, the ones this shard
    built are published after, and the part is uploaded and named relative to the workdir,
    for the flow to fetch (``_fetched``)."""
    settings = settings.on_this_machine()
    workdir = settings.mirror("workdir")
    indexes = settings.index_dir.relative_to(workdir.local).as_posix()
    workdir.pull_children(indexes)  # the indexes other workers built: fetched, not built again
    store = settings.image_store()
    logger = get_run_logger()  # bound to this task run: usable from the model layer's threads

    def progress(step: str, model: str, answered: int, planned: int) -> None:
        logger.info(f"{step} {model}: {answered}/{counted(planned, 'request')} answered")

    with open_models(settings, store, prefect_secret, progress) as models:
        ctx = StageContext(settings, run_id, store, models)
        result = stage.run(samples, ctx)
        result.calls = models.counter.rows()
    spilled = result.spill(ctx.ledger_dir / f"{stage.name}-{index:05d}.parquet")
    if workdir.remote is None:
        return spilled
    from mmcurate.retrieval.vector_index import built_indexes  # faiss: only where indexes are shared

    for name in built_indexes(settings.index_dir):
        workdir.push(f"{indexes}/{name}", racing=True)  # two workers may have built it at once
    shared = [part.relative_to(workdir.local) for part in spilled.ledger_parts]
    for part in shared:
        workdir.push_file(part.as_posix())
    return replace(spilled, ledger_parts=shared)


def _fetched(result: StageResult, settings: Settings) -> StageResult:
    """``result`` with its ledger parts local to this process: a part a worker uploaded (named
    relative to the workdir) fetched from the workdir's store."""
    workdir = settings.mirror("workdir")
    parts = [part if part.is_absolute() else workdir.pull_file(part.as_posix()) for part in result.ledger_parts]
    return replace(result, ledger_parts=parts)


def _run_shards(stage: Stage, samples: pa.Table, settings: Settings, run_id: str, first: int) -> StageResult:
    """``stage`` on ``samples``, cut into task-runner shards numbered from ``first``, merged."""
    parts = shards(samples, settings.task_runner.shard_size) if stage.shardable else [samples]
    futures = run_shard.with_options(task_run_name=f"{stage.name}-{{index}}").map(
        unmapped(stage), parts, list(range(first, first + len(parts))), unmapped(settings), unmapped(run_id)
    )
    try:
        done = futures.result()
    except Exception:
        raise
    except BaseException:  # Ctrl-C or SIGTERM while shards run: their model calls stop at once
        request_stop()
        raise
    return stage.merge([_fetched(result, settings) for result in done])


def _streamed(stage: Stage, samples: SpilledTable, settings: Settings, run_id: str, rows: int) -> StageResult:
    """``stage`` over a spilled table, one streamed shard of ``rows`` samples at a time (the whole
    table, or the columns it ``reads``, for a pool-wide stage); each shard's kept rows are
    spilled to ``workdir/runs/<run id>/kept/`` and the result's ``kept`` reads them back."""
    folder = settings.workdir / "runs" / run_id / "kept"
    if stage.pool_wide:
        columns = stage.reads(samples.schema)
        whole = samples.select(columns or samples.schema.names)
        result = _run_shards(stage, whole, settings, run_id, 0)
        if columns is None:
            return replace(result, kept=spill_chunks([result.kept], folder, stage.name, result.kept.schema))
        ids = result.kept["sample_id"].combine_chunks()
        kept = (chunk.filter(pc.is_in(chunk["sample_id"], value_set=ids)) for chunk in samples.chunks(rows))
        return replace(result, kept=spill_chunks(kept, folder, stage.name, samples.schema))
    results: list[StageResult] = []
    paths: list[Path] = []
    schema: pa.Schema | None = None
    first = 0
    for index, chunk in enumerate(samples.chunks(rows)):
        result = _run_shards(stage, chunk, settings, run_id, first)
        first += len(shards(chunk, settings.task_runner.shard_size)) if stage.shardable else 1
        schema = schema or result.kept.schema
        assert not isinstance(result.kept, SpilledTable)  # one chunk's result is in memory
        paths.append(write_table(result.kept.cast(schema), folder / f"{stage.name}-{index:05d}.parquet"))
        results.append(replace(result, kept=schema.empty_table()))
    merged = stage.merge(results)
    return replace(merged, kept=SpilledTable(tuple(paths), schema or samples.schema))


def run_stage(
    stage: Stage, samples: pa.Table | SpilledTable, settings: Settings, run_id: str, rows: int | None = None
) -> StageResult:
    """Run ``stage`` per shard on the flow's task runner and merge (see the module docstring); a
    spilled table is streamed ``rows`` samples at a time (``_streamed``)."""
    if isinstance(samples, SpilledTable):
        result = _streamed(stage, samples, settings, run_id, rows or samples.num_rows or 1)
    else:
        result = _run_shards(stage, samples, settings, run_id, 0)
    if result.calls:
        create_table_artifact(
            key=f"{stage.name}-calls",
            table=result.calls,
            description=f"{stage.name}: model calls made and cache hits, per model",
        )
        logger = get_run_logger()
        for row in result.calls:  # the rows the card's calls table is made of
            logger.info(
                f"{row['stage']} {row['model']}: {counted(row['calls'], 'model call')}, "
                f"{counted(row['cache_hits'], 'cache hit')}, {row['failures']} failed"
            )
    return result
