"""Shared releases, written once per session (writing runs the Great Expectations suite)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

sys.path.insert(0, str(Path(__file__).parent))  # test modules import release_builders

import release_builders as b  # noqa: E402

from mmcurate.releases.writer import write_release  # noqa: E402


@pytest.fixture(scope="session")
def store_and_shas(tmp_path_factory):
    return b.make_store(tmp_path_factory.mktemp("images"))


@pytest.fixture(scope="session")
def deflection_release(tmp_path_factory, store_and_shas) -> Path:
    store, shas = store_and_shas
    root = tmp_path_factory.mktemp("releases")
    draft = b.deflection_draft(b.deflection_rows(shas), source_mix={"infoseek": [0.3, 0.7], "webqa": [0.3, 0.7]})
    return write_release(draft, root, store, max_rows_per_shard=4)


@pytest.fixture(scope="session")
def reflvqa_release(tmp_path_factory, store_and_shas) -> Path:
    store, shas = store_and_shas
    return write_release(b.reflvqa_draft(b.reflvqa_tables(shas)), tmp_path_factory.mktemp("releases"), store)
