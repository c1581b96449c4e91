"""Model-major execution with early elimination.

Each model in turn gets one batch with every item not yet eliminated, then is released
(an embedded server stopped, a vLLM engine freed) before the next model loads. Whatever
``on_answers`` records (e.g. "a model answered correctly") can eliminate items, so a
settled item is never sent to a later model. ``replay`` (a re-curation's recorded answers,
``judging.recorded``) settles what a model already answered in an earlier release before
anything is sent: it returns the items still to ask.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from mmcurate.core.config import ModelSpec
from mmcurate.models.client import ModelPool
from mmcurate.models.requests import ChatRequest, ChatResponse

T = TypeVar("T")
log = logging.getLogger(__name__)


def model_major(
    pool: ModelPool,
    models: list[str],
    items: list[T],
    build: Callable[[T, ModelSpec], ChatRequest],
    on_answers: Callable[[str, list[tuple[T, ChatResponse]]], None],
    eliminated: Callable[[T], bool],
    stage: str,
    replay: Callable[[str, list[T]], list[T]] | None = None,
) -> None:
    for name in models:
        pending = [item for item in items if not eliminated(item)]
        if replay is not None:
            pending = replay(name, pending)
        log.info("%s: %s gets %d of %d items", stage, name, len(pending), len(items))
        if not pending:  # nothing left: the model is not even loaded
            on_answers(name, [])
            continue
        try:
            client = pool.client(name)
            responses = client.chat([build(item, client.spec) for item in pending], stage)
            on_answers(name, list(zip(pending, responses)))
        finally:
            pool.release(name)
