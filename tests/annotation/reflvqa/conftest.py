"""RefLVQA stage fixtures: canonical Reddit-like samples, scripted model pools, tiny images."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from PIL import Image

from mmcurate.core.config import ModelSpec, Settings
from mmcurate.core.images import ImageStore
from mmcurate.core.records import Sample
from mmcurate.core.schema import SAMPLE
from mmcurate.core.stages import StageContext
from mmcurate.judging.session import Models
from mmcurate.judging.simpleqa import LexicalJudge
from mmcurate.models.accounting import CallCounter
from mmcurate.models.cache import ResponseCache
from mmcurate.models.client import ModelPool


def png(rgb: tuple[int, int, int], size: int = 8) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (size, size), rgb).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(name="png")
def png_fixture() -> Callable[..., bytes]:
    return png


@pytest.fixture
def store(tmp_path: Path) -> ImageStore:
    return ImageStore(tmp_path / "images")


@pytest.fixture
def make_samples() -> Callable[..., pa.Table]:
    """rows: (post_id, comment_id, question, answer, [image sha...])."""

    def make(rows: list[tuple[str, str, str, str, list[str]]]) -> pa.Table:
        samples = [
            Sample(
                "reddit",
                f"{post}/{comment}",
                question,
                [answer],
                list(images),
                meta={"subreddit": "whatisthisthing", "post_id": post, "comment_id": comment},
            )
            for post, comment, question, answer, images in rows
        ]
        return pa.Table.from_pylist([s.to_row() for s in samples], schema=SAMPLE)

    return make


@pytest.fixture
def make_pool(tmp_path: Path, store: ImageStore) -> Iterator[Callable[..., ModelPool]]:
    """Factory: {name: (rules, default, vision)} -> a ModelPool of scripted models."""
    opened: list[tuple[ModelPool, ResponseCache]] = []

    def make(models: dict[str, tuple[list[dict[str, Any]], str | None, bool]]) -> ModelPool:
        specs = {}
        for name, (rules, default, vision) in models.items():
            path = tmp_path / f"{name}.jsonl"
            path.write_text("".join(json.dumps(rule) + "\n" for rule in rules), encoding="utf-8")
            specs[name] = ModelSpec(name=name, backend="scripted", script=path, default=default, vision=vision)
        cache = ResponseCache.open(f"sqlite:///{tmp_path / f'responses-{len(opened)}.sqlite'}")
        pool = ModelPool(Settings(models=specs), cache, store, CallCounter())
        opened.append((pool, cache))
        return pool

    yield make
    for pool, cache in opened:
        pool.close()
        cache.close()


@pytest.fixture
def stage_ctx(tmp_path: Path, store: ImageStore) -> Callable[..., StageContext]:
    """Factory: a stage context (workdir ``tmp_path``) over ``pool`` (or no model pool)."""

    def make(pool: ModelPool | None = None, run_id: str = "r") -> StageContext:
        settings = Settings(workdir=tmp_path, models=pool.settings.models if pool else {})
        models = Models(pool, LexicalJudge(), pool.counter) if pool else None
        return StageContext(settings, run_id, store, models)

    return make
