"""IVF-PQ over the on-disk store: candidates are re-scored exactly, recall is measured at build
time and recorded, and the saved index refuses a store it was not built over."""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np
import pytest

from mmcurate.core.errors import MmcurateError
from mmcurate.retrieval.compressed_index import CompressedIndex, build_compressed, cached_compressed
from mmcurate.retrieval.index_plan import IndexPlan
from mmcurate.retrieval.vector_store import embed_store, open_store, write_records

DIM, N = 32, 4_000
PLAN = IndexPlan("ivfpq", {"nlist": 16, "m": 8, "nbits": 8, "opq": False, "candidates_per_result": 10})


def clustered(n: int, seed: int) -> np.ndarray:
    centres = np.random.default_rng(0).standard_normal((20, DIM))
    rng = np.random.default_rng(seed)
    x = centres[rng.integers(0, 20, n)] + 0.5 * rng.standard_normal((n, DIM))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    return clustered(N, seed=1)


def make_store(root: Path, data: np.ndarray, encoder: str = "rows-v1"):
    store = open_store(root, encoder, DIM, f"rows:{len(data)}", shard_rows=1_500)
    write_records(store, ({"doc_id": f"r{i}", "title": "", "text": str(i)} for i in range(len(data))))
    embed_store(store, lambda texts: data[[int(t) for t in texts]], lambda line: None)
    return store


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, data: np.ndarray) -> CompressedIndex:
    faiss.omp_set_num_threads(1)
    return build_compressed(make_store(tmp_path_factory.mktemp("store"), data), PLAN, progress=lambda line: None)


def test_results_are_rescored_exactly_and_reach_recall(built: CompressedIndex, data: np.ndarray) -> None:
    queries = clustered(100, seed=2)
    scores, rows = built.search(queries, 10)
    np.testing.assert_allclose(scores, np.take_along_axis(queries @ data.T, rows, 1), rtol=0, atol=1e-5)  # exact
    assert (np.diff(scores, axis=1) <= 0).all()  # ranked by the exact score
    _, truth = faiss.knn(queries, data, 10, metric=faiss.METRIC_INNER_PRODUCT)
    recall = np.mean([len(set(t) & set(f)) / 10 for t, f in zip(truth.tolist(), rows.tolist())])
    _, raw = built.index.search(queries, 10)  # the quantized ranking alone, without re-scoring
    raw_recall = np.mean([len(set(t) & set(f)) / 10 for t, f in zip(truth.tolist(), raw.tolist())])
    assert recall >= 0.95 and recall > raw_recall + 0.3  # the codes alone rank poorly; re-scoring fixes it


def test_more_candidates_per_result_reach_what_every_list_does_not(built: CompressedIndex, data: np.ndarray) -> None:
    """At every list the PQ codes' ranking still bounds recall; re-scoring more candidates per result
    lifts it (the knob the autofaiss bench turns to compare at equal recall)."""
    queries = clustered(100, seed=3)
    _, truth = faiss.knn(queries, data, 10, metric=faiss.METRIC_INNER_PRODUCT)
    calibrated = int(built.params["nprobe"])
    built.set_nprobe(int(built.params["nlist"]))
    recalls = []
    for candidates in (1, 10, 40):
        built.set_candidates_per_result(candidates)
        _, rows = built.search(queries, 10)
        recalls.append(np.mean([len(set(t) & set(f)) / 10 for t, f in zip(truth.tolist(), rows.tolist())]))
    built.set_candidates_per_result(int(PLAN.params["candidates_per_result"]))
    built.set_nprobe(calibrated)
    assert recalls[0] + 0.2 < recalls[1] < recalls[2] and recalls[2] >= 0.99
    with pytest.raises(MmcurateError, match="at least 1"):
        built.set_candidates_per_result(0)


def test_build_records_kind_params_recall_and_time(built: CompressedIndex) -> None:
    meta = built.meta
    assert meta["kind"] == "ivfpq" and meta["factory"] == "IVF16,PQ8x8np" and meta["count"] == N
    assert meta["calibration_queries"] == 256 and meta["recall_at_10"] >= 0.97
    assert 1 <= meta["params"]["nprobe"] <= 16 and meta["build_seconds"] >= 0
    assert meta["encoder"] == "rows-v1"


def test_fewer_rows_than_k_pad_with_minus_one(built: CompressedIndex) -> None:
    scores, rows = built.search(clustered(2, seed=3), N + 5)
    assert (rows[:, -5:] == -1).all() and np.isneginf(scores[:, -5:]).all()
    found = rows[0][rows[0] >= 0]
    assert 0 < len(found) == len(set(found.tolist()))  # no row twice


def test_cached_index_is_reused_and_refuses_another_store(tmp_path: Path, data: np.ndarray) -> None:
    store = make_store(tmp_path / "a", data[:2_000])
    first = cached_compressed(store, PLAN, progress=lambda line: None)
    again = cached_compressed(store, PLAN, progress=lambda line: None)
    assert again.meta == first.meta  # loaded, not rebuilt (same build record)
    folder = next(store.root.glob("index-*"))
    other = make_store(tmp_path / "b", data[:1_000])
    with pytest.raises(MmcurateError, match="was built over 2,000"):
        CompressedIndex.load(folder, other)


def test_an_incomplete_store_is_refused(tmp_path: Path, data: np.ndarray) -> None:
    store = open_store(tmp_path / "s", "rows-v1", DIM, "rows", shard_rows=1_500)
    write_records(store, ({"doc_id": f"r{i}", "title": "", "text": str(i)} for i in range(100)))
    with pytest.raises(MmcurateError, match="not complete"):
        build_compressed(store, PLAN, progress=lambda line: None)


def test_a_store_barely_above_the_held_out_rows_trains_on_all_rows(tmp_path: Path) -> None:
    """Issue 47 (found by bench/peers/autofaiss_index.py --quick --data real, 270 passages): the
    256 held-out calibration rows left 14 rows to train 256 PQ centroids on, and faiss failed;
    training now draws from all rows when too few are left beside the held-out ones."""
    plan = IndexPlan("ivfpq", {"nlist": 4, "m": 8, "nbits": 8, "opq": False, "candidates_per_result": 10})
    data = clustered(300, seed=4)
    index = build_compressed(make_store(tmp_path / "s", data), plan, progress=lambda line: None)
    assert len(index) == 300 and index.meta["calibration_queries"] == 256
    _, rows = index.search(data[:5], 1)
    assert rows[:, 0].tolist() == [0, 1, 2, 3, 4]  # each row finds itself, re-scored exactly
    with pytest.raises(MmcurateError, match="needs at least 256 rows to train; .* holds 200"):
        build_compressed(make_store(tmp_path / "t", data[:200]), plan, progress=lambda line: None)
