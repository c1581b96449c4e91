"""Thin Prefect tasks around the RefLVQA stages: one library call each."""
from __future__ import annotations

import pyarrow as pa
from prefect import task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE

from mmcurate.annotation.citations import CitationResult, cite
from mmcurate.annotation.factcheck import fact_checkable
from mmcurate.annotation.kb import load_corpora
from mmcurate.annotation.necessity import image_necessity
from mmcurate.annotation.relevance import image_relevance
from mmcurate.core.config import Settings
from mmcurate.core.images import ImageStore
from mmcurate.core.stages import StageResult

from .models import open_models


def _store(settings: Settings) -> ImageStore:
    return ImageStore(settings.workdir / "images")


def _calls(key: str, rows: list[dict]) -> list[dict]:
    if rows:
        create_table_artifact(key=key, table=rows, description="model calls made and cache hits, per model")
    return rows


@task(name="irrelevant-image-filter", cache_policy=NO_CACHE)
def filter_irrelevant_images(samples: pa.Table, settings: Settings, run_id: str) -> StageResult:
    cfg = settings.reflvqa
    return image_relevance(samples, cfg.cross_modal_encoder, _store(settings), cfg.distractor_images,
                           cfg.relevance_top_k, cfg.seed, run_id)


@task(name="image-necessity-filter", cache_policy=NO_CACHE)
def filter_unneeded_images(samples: pa.Table, settings: Settings, run_id: str) -> tuple[StageResult, list[dict]]:
    cfg = settings.reflvqa
    with open_models(settings, _store(settings)) as models:
        result = image_necessity(samples, models.pool, cfg.inspectors, cfg.evaluator, cfg.max_right_inspectors, run_id)
        calls = models.counter.rows()
    return result, _calls("reflvqa-necessity-calls", calls)


@task(name="fact-checkable-sentences", cache_policy=NO_CACHE)
def mark_fact_checkable(samples: pa.Table, settings: Settings, run_id: str) -> tuple[StageResult, list[dict]]:
    with open_models(settings, _store(settings)) as models:
        result = fact_checkable(samples, models.pool, settings.reflvqa.factcheck_model, run_id)
        calls = models.counter.rows()
    return result, _calls("reflvqa-factcheck-calls", calls)


@task(name="cite-supporting-documents", cache_policy=NO_CACHE)
def cite_documents(samples: pa.Table, image_corpus: list[str], settings: Settings,
                   run_id: str) -> tuple[CitationResult, list[dict]]:
    """Retrieve text and image documents per fact-checkable sentence; keep entailed ones."""
    cfg = settings.reflvqa
    store = _store(settings)
    with open_models(settings, store) as models:
        corpus = load_corpora(cfg.text_corpus, cfg.text_corpus_limit)
        result = cite(samples, corpus, None, image_corpus, store, corpus_name="+".join(cfg.text_corpus),
                      text_encoder="minilm", cross_modal=cfg.cross_modal_encoder, top_text=cfg.top_text,
                      top_images=cfg.top_images, text_entailment=cfg.text_entailment,
                      image_entailment=cfg.image_entailment, pool=models.pool,
                      cache_dir=settings.workdir / "indexes", run_id=run_id)
        calls = models.counter.rows()
    return result, _calls("reflvqa-citation-calls", calls)
