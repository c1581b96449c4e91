"""bench/peers/ (issue 47): the scripts' arguments and the parts of the benches that decide what they
print, without any peer package (datatrove, distilabel, autofaiss are a bench-only extra; the benches
themselves are not tests)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from scipy.sparse import csr_matrix

BENCH = Path(__file__).resolve().parents[2] / "bench" / "peers"


def _load(name: str) -> ModuleType:
    path = list(sys.path)
    try:  # the scripts put bench/ on sys.path to import the benches they build on
        spec = importlib.util.spec_from_file_location(f"peers_{name}", BENCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = path
    return module


@pytest.fixture(scope="module")
def ingest() -> ModuleType:
    return _load("datatrove_ingest")


@pytest.fixture(scope="module")
def minhash() -> ModuleType:
    return _load("minhash")


def test_ingest_arguments(ingest: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    args = ingest.parser().parse_args([])
    assert (args.quick, args.mb, args.months, args.tries, args.child) == (False, 200.0, 2, 2, None)
    assert ingest.parser().parse_args(["--quick", "--months", "3", "--tries", "1"]).months == 3
    with pytest.raises(SystemExit):
        ingest.parser().parse_args(["--months", "0"])
    assert "is not a whole number of at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        ingest.parser().parse_args(["--help"])
    assert done.value.code == 0 and "datatrove" in capsys.readouterr().out


def test_ingest_month_of_a_dump_file(ingest: ModuleType) -> None:
    # the datatrove side joins comments to posts of the same month, named by the file
    assert ingest._month("/x/RS_2022-01.zst") == ingest._month("RC_2022-01.zst") == "2022-01"


def test_minhash_arguments(minhash: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    args = minhash.parser().parse_args([])
    assert (args.sizes, args.sample, args.seed, args.quick) == ([1_000_000], 2_000, 0, False)  # the 593k pool
    assert args.peer_timeout == 360.0  # datasketch stopped there: its exact check of the pool takes ~40 min
    assert minhash.parser().parse_args(["--sizes", "2000", "--sample", "10"]).sizes == [2000]
    with pytest.raises(SystemExit):
        minhash.parser().parse_args(["--sample", "0"])
    assert "is not a whole number of at least 1" in capsys.readouterr().err


def test_minhash_pool_is_what_the_curation_bench_releases(minhash: ModuleType) -> None:
    # bench/curation_scale.py's runs released 59,294 of 100k samples and 592,941 of 1M (README's bench table)
    assert sum(map(minhash.released, range(100_000))) == 59_294
    assert sum(map(minhash.released, range(1_000_000))) == 592_941
    pool = minhash.question_pool(40)
    assert len(pool) == sum(map(minhash.released, range(40)))
    assert pool[0].startswith("What colour is the ") and pool[0].endswith("?") and '"' not in pool[0]


@pytest.mark.parametrize("threshold", [0.7, 0.8])
def test_minhash_exact_pairs_of_anchors_are_every_similar_pair(minhash: ModuleType, threshold: float) -> None:
    """The recall sample's truth (prefix filtering) is every pair with Jaccard >= threshold that
    involves an anchor, as scoring every pair finds them."""
    questions = minhash.question_pool(2_000)
    shingled = minhash.Shingled(questions)
    n = len(questions)
    incidence = csr_matrix(
        (np.ones(len(shingled.ids)), shingled.ids, shingled.indptr), shape=(n, shingled.ids.max() + 1)
    )
    shared = (incidence @ incidence.T).toarray()
    sizes = np.diff(shingled.indptr)
    first, second = np.nonzero(np.triu(shared / (sizes[:, None] + sizes[None, :] - shared) >= threshold, 1))
    anchors = np.random.default_rng(1).choice(n, 200, replace=False)
    expected = {(int(i) << 32) | int(j) for i, j in zip(first, second) if i in anchors or j in anchors}
    assert expected  # the pool has near-duplicates at both thresholds
    assert set(shingled.similar(anchors, threshold).tolist()) == expected
