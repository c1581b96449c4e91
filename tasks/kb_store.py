"""Stage II's knowledge bases at scale: their vector stores embedded on the flow's task runner.

``prepare_kb`` runs between Stage I and Stage II. When some sample will be mined from a KB (its
source's own, ``deflectionbench.mining.<source>.kb``, or the shared ``retrieval.kb``) that
outgrows ``retrieval.memory_gb`` (``retrieval.kb_pages.kb_plan`` picks ``ivfpq``), the KB's
records are streamed into shards here, then one ``kb-shard`` task per pending shard embeds it on
the configured runner (threads, Dask or Ray workers; each process loads the encoder once, and
MiniLM runs on the worker's GPU when it has one), a thin wrapper over ``retrieval.vector_store.embed_shard``. Finished
shards are skipped, so a rerun after a crash embeds only what is left; Stage II then finds the
store complete. A KB that fits in memory needs none of this: nothing is submitted.
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from prefect import get_run_logger, task, unmapped
from prefect.cache_policies import NO_CACHE

from mmcurate.benchmarks.deflectionbench import PAGE_STRATEGIES, DeflectionBenchConfig, RetrievalConfig
from mmcurate.core.config import Settings
from mmcurate.core.errors import MmcurateError
from mmcurate.core.specs import TextEncoderSpec
from mmcurate.core.tables import SpilledTable, table_batches
from mmcurate.retrieval.encoders import text_encoder
from mmcurate.retrieval.kb import iter_documents
from mmcurate.retrieval.kb_pages import kb_plan, kb_store
from mmcurate.retrieval.vector_store import embed_shard, eta_line, load_store, write_records


@task(name="kb-shard", cache_policy=NO_CACHE, retries=1)
def embed_kb_shard(root: str, number: int, encoder: TextEncoderSpec) -> int:
    """Embed shard ``number`` of the store at ``root``; returns its row count."""
    store = load_store(Path(root))
    model = text_encoder(encoder)
    if model.name != store.encoder:
        raise MmcurateError(f"the vector store at {root} belongs to {store.encoder}, not {model.name}")
    embed_shard(store, number, model.encode_text)
    return next(s.rows for s in store.record_shards() if s.number == number)


def prepare_kb(settings: Settings, section: DeflectionBenchConfig, samples: pa.Table | SpilledTable) -> None:
    """Fill the vector store of each KB ``section`` searches (a source's own, ``mining.<source>.kb``,
    or the shared ``retrieval.kb``) on the task runner when Stage II will need it (module docstring)."""
    searched = pa.array(
        [source for source, mining in section.mining.items() if mining.strategy in PAGE_STRATEGIES], pa.string()
    )
    mined: set[str] = set()  # the sources with a sample whose strategy searches a KB's pages
    for batch in table_batches(samples, ["source", "negative_contexts"]):
        needs = pc.and_(
            pc.equal(pc.list_value_length(batch["negative_contexts"]), 0), pc.is_in(batch["source"], value_set=searched)
        )
        mined.update(pc.unique(pc.filter(batch["source"], needs)).to_pylist())
    searching = (section.mining[source].retrieval(section.retrieval) for source in sorted(mined))
    kbs = {str(cfg.kb): cfg for cfg in searching}  # each KB once, whichever sources search it
    for cfg in kbs.values():  # none when nothing searches a KB's pages: nothing is embedded
        _prepare(settings, cfg)


def _prepare(settings: Settings, cfg: RetrievalConfig) -> None:
    """Fill the vector store of ``cfg.kb`` when it outgrows ``cfg.memory_gb``."""
    encoder = text_encoder(cfg.text_encoder)
    n, plan = kb_plan(cfg, encoder)
    if plan.kind != "ivfpq":
        return
    if settings.task_runner.kind != "threads" and settings.mirror("workdir").remote is not None:
        raise MmcurateError(
            f"the knowledge base {cfg.kb} ({n:,} pages) outgrows retrieval.memory_gb, and its sharded vector store "
            "is not shared through an object-store workdir yet: run on task_runner kind 'threads', or give "
            "workdir as a path every worker mounts"
        )
    logger = get_run_logger()
    store = kb_store(cfg, settings.index_dir, encoder)
    logger.info(f"knowledge base {cfg.kb}: {n:,} pages, index {plan.describe()}; store {store.root}")
    write_records(store, iter_documents(cfg.kb, cfg.kb_limit))
    pending = store.pending()
    total = sum(s.rows for s in pending)
    futures = embed_kb_shard.with_options(task_run_name="kb-shard-{number}").map(
        unmapped(str(store.root)), [s.number for s in pending], unmapped(cfg.text_encoder)
    )
    started, done = time.monotonic(), 0
    for future in futures:
        done += future.result()
        logger.info(eta_line(done, total, time.monotonic() - started, "embedding the knowledge base"))
