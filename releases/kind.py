"""What one benchmark's releases are: their Hugging Face configs, card text and checks.

A benchmark's release builder (``releases/<benchmark>.py``) defines its ``ReleaseKind``;
the draft carries it to the writer, which publishes exactly its configs, draws its
distributions and runs its Great Expectations suite; the registry (``mmcurate.benchmarks``)
names it for commands that start from a release on disk (``validate``). A written release
describes itself: its manifest records the benchmark, the pretty name, the split, and the
configs in order, the first of which holds one row per sample.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa

from .manifest_model import Manifest

if TYPE_CHECKING:
    import pandas as pd

    from mmcurate.core.images import ImageStore


class WrittenRelease(Protocol):
    """What a kind's checks read of a written release (``reader.Release`` is one): stated here
    so that the kind, below the reader and the validation, imports neither."""

    path: Path
    manifest: Manifest

    def table(self, config: str) -> pa.Table: ...

    def batches(self, config: str, batch_size: int = 1024) -> Iterator[pa.RecordBatch]: ...


@dataclass
class FrameCheck:
    """One frame, the column that identifies its rows, and the expectations on it (run by
    ``validation``)."""

    name: str
    frame: pd.DataFrame
    id_column: str | None
    expectations: list[Any]


Distribution = tuple[str, str, dict[str, int]]  # x label, y label, counts
Checks = Callable[[WrittenRelease], tuple[list[FrameCheck], list[str]]]
Distributions = Callable[[Mapping[str, pa.Table]], dict[str, Distribution]]
# extra files written into the release folder (sealed with it) from the tables, images from the store;
# returns what the manifest records about them
Exports = Callable[[Mapping[str, pa.Table], Path, "ImageStore"], dict[str, Any]]


@dataclass(frozen=True)
class ReleaseKind:
    benchmark: str  # the manifest's ``benchmark`` and the release folder's parent
    pretty: str  # the card's title, e.g. "VLM-DeflectionBench"
    description: str  # the card's opening paragraph
    configs: tuple[str, ...]  # Hugging Face configs in order; the first holds one row per sample
    checks: Checks  # the Great Expectations suite of a written release, and notes on what it skipped
    distributions: Distributions  # counts worth a bar chart in the card and report
    split: str = "test"  # every config's split: "test" for an evaluation set, "train" for a training set
    exports: Exports | None = None  # e.g. a training export fine-tuning tools read (manifest ``exports``)
    # ``(release values) -> evaluation.harness.Harness``: its evaluation as lmms-eval tasks, written
    # into every release (``lmms_eval/``, manifest ``lmms_eval``)
    harness: Callable[[Mapping[str, Any]], Any] | None = None

    @property
    def harness_factory(self) -> str:
        """The harness as ``"module:attribute"``, for an exported task folder's ``harness.json``:
        lmms-eval's own process imports it from there (``evaluation.harness.load_harness``)."""
        if self.harness is None:
            raise ValueError(f"{self.benchmark} releases have no lmms-eval tasks")
        return f"{self.harness.__module__}:{self.harness.__qualname__}"

    @property
    def samples_config(self) -> str:
        return self.configs[0]
