"""The index a KB gets from its size and the memory budget, pinned at the boundaries."""

from __future__ import annotations

import pytest

from mmcurate.core.errors import MmcurateError
from mmcurate.retrieval.index_plan import (
    GIB,
    code_sizes,
    in_memory_bytes,
    ivfpq_bytes,
    ivfpq_nlist,
    ivfpq_plan,
    plan_index,
)


def budget_for(n: int, dim: int) -> float:
    """The memory_gb at which ``n`` rows of ``dim`` just fit in memory."""
    return in_memory_bytes(n, dim) / GIB


def test_small_kbs_keep_the_in_memory_kinds() -> None:
    assert plan_index(10_033, 384, 4).kind == "flat"  # the demo's wiki-offline
    assert plan_index(49_999, 384, 4).kind == "flat"
    plan = plan_index(50_000, 384, 4)
    assert (plan.kind, plan.params) == ("ivf", {"nlist": 894})
    assert plan_index(1_000_000, 384, 4).kind == "ivf"  # 2.9 GB in memory still fits 4 GB
    # 1.6M x 384 is 2.3 GB of float32, but the embedded matrix and the index's copy both live while
    # it is built (4.7 GB, plus ids): beyond 4 GB
    assert plan_index(1_600_000, 384, 4).kind == "ivfpq"


def test_the_budget_decides_between_memory_and_the_compressed_index() -> None:
    n, dim = 2_000_000, 384
    exact = budget_for(n, dim)
    assert plan_index(n, dim, exact).kind == "ivf"
    assert plan_index(n, dim, exact * (1 - 1e-6)).kind == "ivfpq"
    assert plan_index(n + 1, dim, exact).kind == "ivfpq"


def test_the_papers_kb_gets_ivfpq_within_4_gb() -> None:
    plan = plan_index(6_000_000, 768, 4)
    assert plan.kind == "ivfpq"
    assert plan.params == {"nlist": 2048, "m": 96, "nbits": 8, "opq": False, "candidates_per_result": 10}
    assert plan.memory_bytes <= 4 * GIB
    assert plan.memory_bytes == ivfpq_bytes(6_000_000, 768, 2048, 96, False)


def test_code_bytes_halve_until_the_codes_fit_then_the_plan_fails() -> None:
    n, dim = 100_000_000, 768
    sizes = code_sizes(dim)
    assert sizes == [96, 48, 24]
    fits = {m: ivfpq_bytes(n, dim, ivfpq_nlist(n), m, False) / GIB for m in sizes}
    assert plan_index(n, dim, fits[96]).params["m"] == 96
    assert plan_index(n, dim, fits[96] * 0.999).params["m"] == 48
    assert plan_index(n, dim, fits[48] * 0.999).params["m"] == 24
    with pytest.raises(MmcurateError, match=r"needs at least .* GB .*memory_gb"):
        plan_index(n, dim, fits[24] * 0.999)


def test_nlist_is_a_power_of_two_near_sqrt_n_with_enough_points_per_list() -> None:
    assert ivfpq_nlist(6_000_000) == 2048  # sqrt = 2449
    assert ivfpq_nlist(2_000_000) == 1024  # sqrt = 1414
    assert ivfpq_nlist(20_000) == 256  # at least 256 lists...
    assert ivfpq_nlist(5_000) == 5_000 // 39  # ...unless that leaves fewer than 39 points per list


def test_odd_dimensions_get_a_divisor() -> None:
    assert code_sizes(384) == [48, 24, 12]
    assert code_sizes(146) == [2]  # 146 = 2 x 73
    with pytest.raises(MmcurateError):
        plan_index(-1, 8, 1)


def test_an_ivfpq_plan_with_a_fixed_code_size_is_what_plan_index_picks_for_that_code() -> None:
    paper = plan_index(6_000_000, 768, 4)
    assert ivfpq_plan(6_000_000, 768, int(paper.params["m"])) == paper
    small = ivfpq_plan(11_000, 384, 48)  # the 6M plan's 1 byte per 8 dimensions, at a small n
    assert small.params == {"nlist": 256, "m": 48, "nbits": 8, "opq": False, "candidates_per_result": 10}
    assert small.memory_bytes == ivfpq_bytes(11_000, 384, 256, 48, False)
    with pytest.raises(MmcurateError, match="divide the dimension"):
        ivfpq_plan(11_000, 384, 50)
