"""Thin Prefect tasks around the DeflectionBench stages: one library call each.

Model calls are made resumable by the response cache, not by Prefect result caching:
a rerun after a crash re-enters the stage and every finished call is a cache hit.
"""
from __future__ import annotations

import pyarrow as pa
from prefect import task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE

from mmcurate.annotation.kb import load_kb
from mmcurate.annotation.mining import mine_image_negatives, mine_text_negatives
from mmcurate.annotation.oracle import oracle_filter
from mmcurate.annotation.pairing import pair_knowledge
from mmcurate.core.config import Settings
from mmcurate.core.images import ImageStore
from mmcurate.gating.parametric import parametric_gate

from .models import open_models


def _store(settings: Settings) -> ImageStore:
    return ImageStore(settings.workdir / "images")


def _report_calls(key: str, rows: list[dict]) -> None:
    if rows:
        create_table_artifact(key=key, table=rows, description="model calls made and cache hits")


@task(name="stage-i-parametric-gating", cache_policy=NO_CACHE)
def gate_parametrically(samples: pa.Table, settings: Settings, run_id: str):
    cfg = settings.deflectionbench
    with open_models(settings, _store(settings)) as models:
        result = parametric_gate(samples, models.pool, models.judge, cfg.gating, run_id)
        calls = models.counter.rows()
    _report_calls("deflectionbench-stage-i-calls", calls)
    return result, calls


@task(name="stage-ii-knowledge-pairing", cache_policy=NO_CACHE)
def pair_with_knowledge(samples: pa.Table, settings: Settings, run_id: str):
    cfg = settings.deflectionbench
    store = _store(settings)
    index_dir = settings.workdir / "indexes"
    kb = load_kb(cfg.retrieval.kb, cfg.retrieval.kb_limit)
    needs_mining = samples.filter(pa.compute.equal(pa.compute.list_value_length(samples["negative_contexts"]), 0))
    mined_text = mine_text_negatives(needs_mining, kb, cfg.retrieval, index_dir, store)
    mined_images = mine_image_negatives(needs_mining, store, cfg.retrieval, index_dir)
    return pair_knowledge(samples, mined_text, mined_images, run_id)


@task(name="stage-iii-quality-control", cache_policy=NO_CACHE)
def check_with_oracle(samples: pa.Table, settings: Settings, run_id: str):
    cfg = settings.deflectionbench
    with open_models(settings, _store(settings)) as models:
        result = oracle_filter(samples, models.pool, models.judge, cfg.gating.pool, cfg.k_min, run_id)
        calls = models.counter.rows()
    _report_calls("deflectionbench-stage-iii-calls", calls)
    return result, calls
