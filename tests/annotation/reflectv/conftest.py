"""ReflectV stage fixtures: a ``lab`` with scripted models (vision or not), an image store,
samples tagged with a domain, and sample tables carrying dialogue turns."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from PIL import Image

from mmcurate.annotation.reflectv.chains import BUILT, ORIGIN, new_turn, with_chains, with_columns
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


def png(rgb: tuple[int, int, int] = (40, 40, 40), size: tuple[int, int] = (120, 90)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, rgb).save(buffer, format="PNG")
    return buffer.getvalue()


class Lab:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.store = ImageStore(root / "images")
        self.cache = ResponseCache.open(f"sqlite:///{root / 'responses.sqlite'}")
        self.specs: dict[str, ModelSpec] = {}
        self.counter = CallCounter()
        self._pool: ModelPool | None = None

    def model(self, name: str, rules: list[dict[str, Any]], default: str | None = None, vision: bool = False) -> str:
        script = self.root / f"{name}.jsonl"
        script.write_text("".join(json.dumps(rule) + "\n" for rule in rules))
        self.specs[name] = ModelSpec(name=name, backend="scripted", script=script, default=default, vision=vision)
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        return name

    @property
    def pool(self) -> ModelPool:
        if self._pool is None:
            self._pool = ModelPool(Settings(workdir=self.root, models=self.specs), self.cache, self.store, self.counter)
        return self._pool

    def ctx(self) -> StageContext:
        return StageContext(self.pool.settings, "r", self.store, Models(self.pool, LexicalJudge(), self.counter))

    def calls(self, model: str) -> dict[str, int]:
        """{"calls": ..., "cache_hits": ...} of a model over all stages."""
        rows = [r for r in self.counter.rows() if r["model"] == model]
        return {k: sum(r[k] for r in rows) for k in ("calls", "cache_hits", "failures")}

    def image(self, data: bytes | None = None) -> str:
        return self.store.put(data or png())

    def sample(
        self,
        source_id: str,
        question: str,
        truth: str,
        domain: str = "General QA",
        image: str | None = None,
        **meta: Any,
    ) -> dict[str, Any]:
        return Sample(
            "test", source_id, question, [truth], [image or self.image()], meta={"domain": domain, **meta}
        ).to_row()

    @staticmethod
    def table(rows: list[dict[str, Any]]) -> pa.Table:
        return pa.Table.from_pylist(rows, schema=SAMPLE)

    def chains(
        self,
        rows: list[dict[str, Any]],
        turns: list[list[tuple[str, int, str]]],
        issues: list[str | None] | None = None,
    ) -> pa.Table:
        """Samples that came out of the dialogue stage: ``turns`` as (answer, score, feedback)."""
        table = with_chains(
            self.table(rows), [[new_turn(*t) for t in ts] for ts in turns], issues or [None] * len(rows)
        )
        return with_columns(table, {ORIGIN: pa.array([BUILT] * len(rows), type=pa.string())})

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        self.cache.close()


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    lab = Lab(tmp_path)
    yield lab
    lab.close()
