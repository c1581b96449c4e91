"""Opening the model layer for one task: response cache, call counter, model pool, judge."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from mmcurate.core.config import Settings
from mmcurate.core.images import ImageStore
from mmcurate.gating.accounting import CallCounter
from mmcurate.gating.cache import ResponseCache
from mmcurate.gating.client import ModelPool
from mmcurate.gating.judge import Judge, make_judge


@dataclass
class Models:
    pool: ModelPool
    judge: Judge
    counter: CallCounter


@contextmanager
def open_models(settings: Settings, store: ImageStore) -> Iterator[Models]:
    settings.workdir.mkdir(parents=True, exist_ok=True)
    cache = ResponseCache.open(settings.response_cache_url)
    counter = CallCounter()
    with ModelPool(settings, cache, store, counter) as pool:
        yield Models(pool, make_judge(settings, pool), counter)
