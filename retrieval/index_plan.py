"""Which vector index a knowledge base gets, from its size and the memory budget.

``plan_index(n, dim, memory_gb)`` is a pure function:

- While an in-memory index fits the budget (``in_memory_bytes``: the embedded matrix and the
  index's own copy, both float32, exist together while it is built, plus about 100 bytes of
  string id per row), the KB keeps today's in-memory kinds (``vector_index.choose_kind``:
  ``flat`` below 50,000 rows, ``ivf`` from there), so small KBs behave exactly as before.
- Otherwise ``ivfpq``: an inverted file over product-quantised codes (``compressed_index``),
  whose candidates are re-scored exactly from the on-disk vectors. Its parameters:

  - ``nlist``: the power of two nearest ``sqrt(n)`` (2,048 at 6M), at least 256, and at most
    ``n / 39`` so k-means sees 39 points per centroid (faiss warns below that). Fewer,
    larger lists than the in-memory IVF's ``4 sqrt(n)``: assigning 6M vectors to 2,048
    centroids is a quarter of the arithmetic of 8,192, and re-scoring recovers the recall a
    coarser list costs.
  - ``m``: PQ code bytes per vector (8 bits per sub-quantizer): ``dim / 8`` (96 at 768-d,
    sub-vectors of 8 dimensions), halved while the codes do not fit the budget, down to
    ``dim / 32``; below that the KB does not fit and the error says how much memory it needs.
  - ``opq``: an OPQ rotation before the quantizer (``OPQ_DEFAULT``; see below).
  - ``candidates``: ``CANDIDATES_PER_RESULT`` = 10 candidates per result asked (100 for a top
    10) are re-scored exactly.

  Its resident memory (``ivfpq_bytes``): the codes and 8-byte ids in the inverted lists, the
  coarse centroids and the rotation, plus what the streamed build holds besides (the training
  sample of ``TRAIN_PER_LIST`` rows per list, one chunk of vectors and the mapped shard it
  comes from); a search holds less (its gathered candidates).

OPQ: ``bench/kb_scale.py --opq`` measures IVF-PQ with and without the rotation on the same data.
At 200k x 768 the rotation took 2.4 times as long to train (1,842 s against 777 s) for a
measured recall@10 after re-scoring of 0.998 against 0.999 (docs/figures.md,
"bench/kb_scale.py"): it does not pay once candidates are re-scored, so ``OPQ_DEFAULT`` is off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from mmcurate.core.errors import MmcurateError

from .vector_index import choose_kind, ivf_nlist
from .vector_store import CHUNK_ROWS, SHARD_ROWS

GIB = 2**30
ID_BYTES = 100  # a Python str id and its list slot, per row of an in-memory index
IVF_ID_BYTES = 8  # faiss stores an int64 id per code in the inverted lists
MIN_NLIST = 256
MIN_POINTS_PER_CENTROID = 39
MIN_SUBVECTOR, MAX_SUBVECTOR = 8, 32  # dimensions per PQ sub-quantizer: m = dim/8 .. dim/32
CANDIDATES_PER_RESULT = 10
TRAIN_PER_LIST = 64  # k-means training rows per coarse centroid (compressed_index)
OPQ_DEFAULT = False


@dataclass(frozen=True)
class IndexPlan:
    kind: str  # "flat" | "ivf" (in memory, vector_index) | "ivfpq" (compressed_index)
    params: dict[str, int | bool] = field(default_factory=dict)
    memory_bytes: int = 0  # estimated resident bytes while building or searching

    def describe(self) -> str:
        params = ", ".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.kind}({params}) ~{self.memory_bytes / GIB:.2f} GB"


def in_memory_bytes(n: int, dim: int) -> int:
    return n * (2 * 4 * dim + ID_BYTES)


def ivfpq_bytes(n: int, dim: int, nlist: int, m: int, opq: bool) -> int:
    index = n * (m + IVF_ID_BYTES) + nlist * dim * 4 + (dim * dim * 4 if opq else 0)
    working = (min(n, nlist * TRAIN_PER_LIST) + min(n, CHUNK_ROWS) + min(n, SHARD_ROWS)) * dim * 4
    return index + working


def ivfpq_nlist(n: int) -> int:
    nearest = 2 ** round(math.log2(max(math.sqrt(n), 1)))
    return max(1, min(max(nearest, MIN_NLIST), n // MIN_POINTS_PER_CENTROID))


def plan_index(n: int, dim: int, memory_gb: float, opq: bool = OPQ_DEFAULT) -> IndexPlan:
    """The index for ``n`` vectors of ``dim`` within ``memory_gb`` (module docstring)."""
    if n < 0 or dim < 1 or memory_gb <= 0:
        raise MmcurateError(f"plan_index needs n >= 0, dim >= 1 and memory_gb > 0, got {n}, {dim}, {memory_gb}")
    budget = int(memory_gb * GIB)
    small = in_memory_bytes(n, dim)
    if small <= budget:
        kind = choose_kind(n)
        return IndexPlan(kind, {"nlist": ivf_nlist(n)} if kind == "ivf" else {}, small)
    sizes = code_sizes(dim)
    for m in sizes:
        plan = ivfpq_plan(n, dim, m, opq)
        if plan.memory_bytes <= budget:
            return plan
    need = plan.memory_bytes
    raise MmcurateError(
        f"a knowledge base of {n:,} x {dim} vectors needs at least {need / GIB:.1f} GB for its "
        f"compressed index ({sizes[-1]} code bytes per vector); retrieval.memory_gb is {memory_gb}"
    )


def ivfpq_plan(n: int, dim: int, m: int, opq: bool = OPQ_DEFAULT) -> IndexPlan:
    """The ``ivfpq`` plan with ``m`` code bytes per vector for ``n`` x ``dim`` (``plan_index``'s
    choice once ``m`` is fixed; ``bench/kb_scale.py`` uses it to build a large KB's index on a
    small sample at the same code bytes per dimension)."""
    if m < 1 or dim % m:
        raise MmcurateError(f"an ivfpq code of {m} bytes needs to divide the dimension {dim}")
    nlist = ivfpq_nlist(n)
    return IndexPlan(
        "ivfpq",
        {"nlist": nlist, "m": m, "nbits": 8, "opq": opq, "candidates_per_result": CANDIDATES_PER_RESULT},
        ivfpq_bytes(n, dim, nlist, m, opq),
    )


def code_sizes(dim: int) -> list[int]:
    """PQ code bytes to try, largest first: divisors of ``dim`` from about dim/8, halving, down
    to about dim/32 (at least one)."""
    sizes: list[int] = []
    at_most = max(1, dim // MIN_SUBVECTOR)
    while at_most >= max(1, dim // MAX_SUBVECTOR):
        size = _largest_divisor(dim, at_most)
        if size < max(1, dim // MAX_SUBVECTOR) or size in sizes:
            break
        sizes.append(size)
        at_most = size // 2
    return sizes or [_largest_divisor(dim, max(1, dim // MIN_SUBVECTOR))]


def _largest_divisor(dim: int, at_most: int) -> int:
    """The largest divisor of ``dim`` not above ``at_most`` (0 when ``at_most`` < 1)."""
    return next((d for d in range(at_most, 0, -1) if dim % d == 0), 0)
