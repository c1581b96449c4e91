"""The dry-run DeflectionBench flow with its knowledge base forced beyond the memory budget:
the KB's vector store is embedded shard by shard on the task runner before Stage II, Stage II
searches the compressed index with exact re-scoring, and the release is the one the in-memory
index makes (every page is a candidate here, so re-scoring ranks them all exactly); the
manifest records the index it searched."""

from __future__ import annotations

import json
from pathlib import Path

from mmcurate.releases.reader import open_release
from mmcurate.retrieval import kb_pages, vector_store
from mmcurate.retrieval.index_plan import IndexPlan
from tests.dryrun import dryrun_config
from tests.flows.release_fingerprint import content_fingerprint
from tests.flows.test_dryrun_equivalence import GOLDEN

PLAN = IndexPlan("ivfpq", {"nlist": 1, "m": 8, "nbits": 4, "opq": False, "candidates_per_result": 10})


def test_a_kb_beyond_the_budget_gives_the_same_release(tmp_path, fixtures_root, prefect_harness, monkeypatch):
    from mmcurate.flows.deflectionbench.curate import deflectionbench

    monkeypatch.setattr(kb_pages, "plan_index", lambda n, dim, memory_gb: PLAN)
    monkeypatch.setattr(kb_pages, "STORE_SHARD_ROWS", 16)  # 60 pages: 4 shards for the runner

    def sequential(store, *args, **kwargs):  # Stage II's own path must find nothing left to embed
        assert store.complete(), "prepare_kb left shards for Stage II to embed"

    monkeypatch.setattr(kb_pages, "embed_store", sequential)
    config = dryrun_config(tmp_path, fixtures_root, oracle_rule="none_correct", leakage_filter="answer_or_overlap")
    release = Path(deflectionbench(config=str(config)))
    assert content_fingerprint(release, portable=True) == json.loads(GOLDEN.read_text())

    (index,) = open_release(release).manifest.indexes
    assert (index["name"], index["kind"], index["count"], index["factory"]) == ("kb-pages", "ivfpq", 60, "IVF1,PQ8x4np")
    assert index["recall_at_10"] == 1.0 and index["build_seconds"] >= 0 and "held-out" in index["recall_measured_on"]
    (store,) = (tmp_path / "work" / "indexes").glob("kb-store-*")
    assert len(vector_store.load_store(store).record_shards()) == 4


def test_each_kb_a_source_searches_gets_its_store_once(make, monkeypatch, tmp_path):
    """Issue 43 item 5: with E-VQA's own KB (``mining.evqa.kb``) beside the shared one, the KBs
    Stage II will search are prepared before it, each once; a source whose samples bring their
    own negatives, or that searches no KB, prepares nothing."""
    from mmcurate.benchmarks.deflectionbench import DeflectionBenchConfig
    from mmcurate.tasks import kb_store

    prepared: list[str] = []
    monkeypatch.setattr(kb_store, "_prepare", lambda settings, cfg: prepared.append(str(cfg.kb)))
    section = DeflectionBenchConfig(
        sources=[{"name": name, "root": "."} for name in ("infoseek", "viquae", "evqa", "webqa")],
        gating={"pool": ["m"]},
        retrieval={"kb": str(tmp_path / "shared.jsonl")},
        mining={"evqa": {"kb": str(tmp_path / "evqa.jsonl")}},
    )
    rows = [
        make.sample("i", "Q?", ["A"], source="infoseek"),
        make.sample("v", "Q?", ["A"], source="viquae"),
        make.sample("e", "Q?", ["A"], source="evqa"),
        make.sample("w", "Q?", ["A"], source="webqa", negatives=[make.text("n", "its own negative")]),
    ]
    kb_store.prepare_kb(None, section, make.table(rows))
    assert sorted(prepared) == sorted([str(tmp_path / "shared.jsonl"), str(tmp_path / "evqa.jsonl")])
    prepared.clear()
    kb_store.prepare_kb(None, section, make.table(rows[3:]))  # WebQA brings its negatives: nothing is searched
    assert prepared == []


def test_a_store_workers_cannot_share_is_refused_in_one_line(tmp_path, monkeypatch):
    """Issue 46: a KB beyond the budget is embedded into a sharded store on the workers' disks,
    which an object-store workdir does not share yet: on Dask or Ray that is one line before
    any work, not a worker failing on a store it cannot see; on threads it runs (one machine)."""
    import pytest

    from mmcurate.benchmarks.deflectionbench import RetrievalConfig
    from mmcurate.core.config import Settings
    from mmcurate.core.errors import MmcurateError
    from mmcurate.tasks import kb_store

    monkeypatch.setenv("MMCURATE_SCRATCH", str(tmp_path / "scratch"))
    monkeypatch.setattr(kb_store, "text_encoder", lambda spec: None)
    monkeypatch.setattr(kb_store, "kb_plan", lambda cfg, encoder: (6_000_000, PLAN))
    cfg = RetrievalConfig(kb=str(tmp_path / "kb.jsonl"))
    on_dask = Settings(workdir="s3://bucket/work", task_runner={"kind": "dask"})
    with pytest.raises(MmcurateError, match="6,000,000 pages.*not shared through an object-store workdir") as caught:
        kb_store._prepare(on_dask, cfg)
    assert "\n" not in str(caught.value)
    started = []
    monkeypatch.setattr(kb_store, "get_run_logger", lambda: started.append(True) or pytest.fail("stop here"))
    with pytest.raises(pytest.fail.Exception):
        kb_store._prepare(Settings(workdir="s3://bucket/work"), cfg)  # threads: past the check
    assert started
