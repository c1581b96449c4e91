"""Shared releases, written once per session (writing runs the Great Expectations suite)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

from mmcurate.releases.writer import write_release  # noqa: E402  (the environment above first)
from tests.releases import release_builders as b  # noqa: E402


@pytest.fixture(scope="session")
def store_and_shas(tmp_path_factory):
    return b.make_store(tmp_path_factory.mktemp("images"))


@pytest.fixture(scope="session")
def deflection_release(tmp_path_factory, store_and_shas) -> Path:
    store, shas = store_and_shas
    root = tmp_path_factory.mktemp("releases")
    draft = b.deflection_draft(b.deflection_rows(shas), source_mix={"infoseek": [0.3, 0.7], "webqa": [0.3, 0.7]})
    return write_release(draft, root, store, max_rows_per_shard=4)


@pytest.fixture
def copy(tmp_path, deflection_release) -> Path:
    """A writable copy of the DeflectionBench release, laid out as under a releases root."""
    target = tmp_path / "releases" / "deflectionbench" / "1.0.0"
    shutil.copytree(deflection_release, target)
    return target


@pytest.fixture
def no_prefect(monkeypatch):
    """Fail the test if a command gets as far as starting a flow run."""
    import mmcurate.cli.session

    def refuse(call):
        raise AssertionError("the command started a flow run")

    monkeypatch.setattr(mmcurate.cli.session, "run_flow", refuse)
    monkeypatch.setattr("mmcurate.cli.run.run_flow", refuse)


@pytest.fixture(scope="session")
def reflvqa_release(tmp_path_factory, store_and_shas) -> Path:
    store, shas = store_and_shas
    return write_release(b.reflvqa_draft(b.reflvqa_tables(shas)), tmp_path_factory.mktemp("releases"), store)
