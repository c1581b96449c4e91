"""Index kinds agree with exact search; cached indexes are built once and reused across processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mmcurate.core.errors import MmcurateError
from mmcurate.retrieval.vector_index import VectorIndex, build_index, cached_index, choose_kind, ivf_nlist


def clustered(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    """``n`` normalised draws around 20 fixed centres (``seed`` varies the draws, not the centres)."""
    centres = np.random.default_rng(0).standard_normal((20, dim))
    rng = np.random.default_rng(seed)
    x = centres[rng.integers(0, 20, n)] + 0.5 * rng.standard_normal((n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def recall_at_10(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found.tolist(), truth.tolist())]))


def test_choose_kind_thresholds() -> None:
    assert choose_kind(10) == "flat"
    assert choose_kind(49_999) == "flat"
    assert choose_kind(50_000) == "ivf"
    assert ivf_nlist(1_000_000) == 4000
    assert ivf_nlist(50_000) == round(4 * 50_000**0.5)
    assert ivf_nlist(2_000) == 2_000 // 40  # never fewer than 40 training points per list


def test_flat_is_exact_and_pads_with_minus_one() -> None:
    x = clustered(50)
    index = build_index(x, [f"v{i}" for i in range(50)])
    assert index.kind == "flat"
    scores, rows = index.search(x[:3], 60)
    assert rows[:, 0].tolist() == [0, 1, 2]
    np.testing.assert_allclose(scores[:, 0], 1.0, atol=1e-5)
    assert (rows[:, 50:] == -1).all()
    assert index.ids[rows[1, 0]] == "v1"


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_approximate_kinds_reach_recall(kind: str) -> None:
    x = clustered(6000)
    queries = clustered(200, seed=1)
    _, truth = build_index(x, [str(i) for i in range(6000)], "flat").search(queries, 10)
    index = build_index(x, [str(i) for i in range(6000)], kind)
    assert index.kind == kind
    _, found = index.search(queries, 10)
    assert recall_at_10(found, truth) >= 0.9
    if kind == "ivf":
        assert index.params["nlist"] == ivf_nlist(6000)
        assert 1 <= index.params["nprobe"] <= index.params["nlist"]
        np.testing.assert_allclose(index.vectors([5, 7]), x[[5, 7]], atol=1e-6)


@pytest.mark.parametrize("kind", ["flat", "ivf", "hnsw"])
def test_save_and_load_round_trip(tmp_path: Path, kind: str) -> None:
    x = clustered(2000)
    index = build_index(x, [f"id{i}" for i in range(2000)], kind)
    index.save(tmp_path / kind)
    loaded = VectorIndex.load(tmp_path / kind)
    assert (loaded.kind, loaded.ids, loaded.params) == (index.kind, index.ids, index.params)
    np.testing.assert_array_equal(loaded.search(x[:20], 5)[1], index.search(x[:20], 5)[1])
    np.testing.assert_allclose(loaded.vectors([3]), x[[3]], atol=1e-6)


def test_bad_inputs() -> None:
    with pytest.raises(MmcurateError, match="one vector per id"):
        build_index(np.zeros((3, 4), np.float32), ["a", "b"])
    with pytest.raises(MmcurateError, match="unknown index kind"):
        build_index(np.zeros((3, 4), np.float32), ["a", "b", "c"], "lsh")
    with pytest.raises(MmcurateError, match="query dimension"):
        build_index(clustered(5), list("abcde")).search(np.zeros((1, 3), np.float32), 1)


def test_cached_index_builds_once_and_survives_a_new_process(tmp_path: Path) -> None:
    x = clustered(300)
    ids = [f"d{i}" for i in range(300)]
    calls: list[int] = []

    def embed() -> np.ndarray:
        calls.append(1)
        return x

    first = cached_index(tmp_path, "kb-pages", "enc-a", "fp1", ids, embed)
    second = cached_index(tmp_path, "kb-pages", "enc-a", "fp1", ids, embed)
    assert len(calls) == 1
    np.testing.assert_array_equal(first.search(x[:5], 3)[1], second.search(x[:5], 3)[1])
    cached_index(tmp_path, "kb-pages", "enc-b", "fp1", ids, embed)  # another encoder: a new index
    cached_index(tmp_path, "kb-pages", "enc-a", "fp2", ids, embed)  # changed content: a new index
    assert len(calls) == 3
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp folders left

    script = f"""
import numpy as np
from pathlib import Path
from mmcurate.retrieval.vector_index import cached_index
def embed():
    raise SystemExit("embed called on a cache hit")
index = cached_index(Path({str(tmp_path)!r}), "kb-pages", "enc-a", "fp1", {ids!r}, embed)
print(len(index), index.ids[0], index.kind)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["300", "d0", "flat"]
