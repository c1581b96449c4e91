"""Shared setup for the source adapter tests.

A test module names its adapter in ``SOURCE`` and gets, once per module, that source's
fixture ``builder`` (tests/fixtures/builders/<SOURCE>.py), the raw folder it builds
(``root``) and the ingest of that folder (``result``). The reader fixtures turn any
ingest result into plain Python rows.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pyarrow.parquet as pq
import pytest

from mmcurate.sources.ingest import IngestResult, ingest


def load_builder(name: str) -> ModuleType:
    return importlib.import_module(f"tests.fixtures.builders.{name}")


def samples_by_id(result: IngestResult) -> dict[str, dict]:
    return {row["source_id"]: row for row in pq.read_table(result.samples_path).to_pylist()}


def quarantine_pairs(result: IngestResult) -> list[tuple[str, str]]:
    return [(r["locator"], r["reason"]) for r in pq.read_table(result.quarantine_path).to_pylist()]


@pytest.fixture(scope="module")
def builder(request: pytest.FixtureRequest) -> ModuleType:
    return load_builder(request.module.SOURCE)


@pytest.fixture(scope="module")
def root(builder: ModuleType, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp(f"{request.module.SOURCE}_raw")
    builder.build(path)
    return path


@pytest.fixture(scope="module")
def result(root: Path, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> IngestResult:
    return ingest(request.module.SOURCE, root, tmp_path_factory.mktemp(f"{request.module.SOURCE}_out"))


@pytest.fixture(scope="session")
def samples_of() -> Callable[[IngestResult], dict[str, dict]]:
    """source_id -> sample row as stored (``meta`` is a JSON string)."""
    return samples_by_id


@pytest.fixture(scope="session")
def rows() -> Callable[[IngestResult], dict[str, dict]]:
    """source_id -> sample row with ``meta`` parsed."""
    return lambda result: {sid: {**r, "meta": json.loads(r["meta"])} for sid, r in samples_by_id(result).items()}


@pytest.fixture(scope="session")
def quarantine_of() -> Callable[[IngestResult], list[tuple[str, str]]]:
    """(locator, reason) of every quarantined record, in file order."""
    return quarantine_pairs


@pytest.fixture(scope="session")
def rejected() -> Callable[[IngestResult], dict[str, str]]:
    """locator -> reason of the quarantined records."""
    return lambda result: dict(quarantine_pairs(result))
