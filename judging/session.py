"""The model layer opened for one unit of work: response cache, call counter, pool, judge."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from mmcurate.core.config import Settings
from mmcurate.core.images import ImageStore
from mmcurate.judging.simpleqa import Judge, make_judge
from mmcurate.models.accounting import CallCounter
from mmcurate.models.cache import ResponseCache
from mmcurate.models.client import ModelPool, Progress, SecretLoader


@dataclass
class Models:
    pool: ModelPool
    judge: Judge
    counter: CallCounter


@contextmanager
def open_models(
    settings: Settings, store: ImageStore, secrets: SecretLoader | None = None, progress: Progress | None = None
) -> Iterator[Models]:
    """Open the response cache and a lazy model pool (no model loads until asked)."""
    settings.workdir.mkdir(parents=True, exist_ok=True)
    cache = ResponseCache.open(settings.response_cache_url)
    counter = CallCounter()
    try:
        with ModelPool(settings, cache, store, counter, secrets, progress) as pool:
            yield Models(pool, make_judge(settings, pool), counter)
    finally:
        cache.close()
