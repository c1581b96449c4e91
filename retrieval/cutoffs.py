"""Cutting a ranked retrieval list: CRUISE's MAD dynamic cutoff, or a fixed top-K.

``apply_cutoff(ranked, spec, scale)`` takes ``(item, score)`` pairs and says which it keeps,
which it cuts and why (``Cut.detail`` goes to the ledger as is).

MAD rule (CRUISE, seed 001 eq. 5-6; ``core.specs.MadCutoff``): with ``top`` the 10 best
scores (fewer when fewer were retrieved), ``median`` their median (the mean of the two
middle values for an even count) and ``MAD = median(|x - median|)`` over the same scores,
with no consistency factor (no 1.4826),

    theta = max(tau, median(top) - lambda * MAD(top))

and the kept items are those with score >= theta, best first, at most ``max_keep``. With the
paper's tau 0.1, lambda 1.5, max_keep 3, the scores [.95 .9 .4 .3 .2 .1 .05 .04 .03 .02] give
median .15, MAD .125, theta = max(.1, -.0375) = .1, so .95 .9 .4 are kept; scores all below
.1 keep nothing. Equal scores keep their input order (a stable sort), so a tie at the
``max_keep`` boundary goes to the item ranked first by the retriever.

Scores must be in [0, 1] (tau is an absolute floor on that scale), so the caller says what
its scores are (``scale``):

- ``unit``: already in [0, 1] (a reranker with a sigmoid head, as CRUISE's
  bge-reranker-v2-m3); a score outside [0, 1] is an error, never clipped silently;
- ``cosine``: cosine similarities in [-1, 1] (our FAISS inner products over L2-normalised
  embeddings): negatives become 0, the rest is kept as is. A negative cosine says "unrelated"
  as clearly as 0 does; rescaling with (x + 1) / 2 instead would lift every unrelated
  document to about .5 and make tau's floor meaningless;
- ``logit``: unbounded relevance logits (a cross-encoder without a sigmoid): the logistic
  function, which is how sigmoid-headed rerankers produce their [0, 1] scores.

``top_k``: the first ``k`` items (by score, stable), whatever their scores.

``retrieval_score(cut)`` is CRUISE's ``S_ret`` (Algorithm 1): the best score of the ranking on
the [0, 1] scale, kept or cut, 0 when nothing was retrieved. Algorithm 1 compares it with
``tau_ret`` on its own, apart from what the cutoff kept (``evaluation.verify_first``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from mmcurate.core.errors import MmcurateError
from mmcurate.core.specs import CutoffSpec, MadCutoff, TopK, coerce

T = TypeVar("T")
Scale = Literal["unit", "cosine", "logit"]
MAD_WINDOW = 10  # CRUISE computes the statistics over the top 10 reranked scores


@dataclass(frozen=True)
class Cut(Generic[T]):
    """What a cutoff kept (best first) and cut, and the numbers that decided it."""

    kept: list[tuple[T, float]]  # (item, score on the [0, 1] scale)
    cut: list[tuple[T, float]]
    detail: dict[str, Any] = field(default_factory=dict)  # JSON-able: cutoff, theta, median, mad, counts


def unit_scores(scores: Sequence[float], scale: Scale) -> list[float]:
    """``scores`` on the [0, 1] scale (see the module docstring)."""
    if scale == "unit":
        bad = [s for s in scores if not 0.0 <= s <= 1.0]
        if bad:
            raise MmcurateError(
                f"cutoff scores must be in [0, 1] for scale 'unit', got {bad[0]!r}; "
                "say scale='cosine' or 'logit' for other scores"
            )
        return [float(s) for s in scores]
    if scale == "cosine":
        return [min(1.0, max(0.0, float(s))) for s in scores]
    if scale == "logit":
        return [
            1.0 / (1.0 + math.exp(-float(s))) if s >= 0 else math.exp(float(s)) / (1.0 + math.exp(float(s)))
            for s in scores
        ]
    raise MmcurateError(f"unknown score scale {scale!r}; use 'unit', 'cosine' or 'logit'")


def mad_threshold(scores: Sequence[float], tau: float, lam: float) -> tuple[float, float, float]:
    """(theta, median, MAD) of the best ``MAD_WINDOW`` of ``scores`` (at least one score)."""
    top = sorted(scores, reverse=True)[:MAD_WINDOW]
    median = statistics.median(top)
    mad = statistics.median([abs(x - median) for x in top])
    return max(tau, median - lam * mad), median, mad


def apply_cutoff(ranked: Sequence[tuple[T, float]], spec: CutoffSpec | str, scale: Scale = "unit") -> Cut[T]:
    """Keep the items of ``ranked`` that ``spec`` keeps (see the module docstring)."""
    spec = coerce(CutoffSpec, spec)
    scores = unit_scores([score for _, score in ranked], scale)
    order = sorted(range(len(ranked)), key=lambda i: -scores[i])  # stable: ties keep their rank
    detail: dict[str, Any] = {"cutoff": str(spec), "scale": scale, "retrieved": len(ranked)}
    if isinstance(spec, TopK):
        chosen = order[: spec.k]
    else:
        assert isinstance(spec, MadCutoff)
        if ranked:
            theta, median, mad = mad_threshold(scores, spec.tau, spec.lam)
            chosen = [i for i in order if scores[i] >= theta][: spec.max_keep]
            detail.update(theta=theta, median=median, mad=mad)
        else:
            chosen = []
            detail.update(theta=None, median=None, mad=None)
    keep = set(chosen)
    kept = [(ranked[i][0], scores[i]) for i in chosen]
    cut = [(ranked[i][0], scores[i]) for i in order if i not in keep]
    detail.update(kept=len(kept), cut=len(cut))
    return Cut(kept, cut, detail)


def retrieval_score(cut: Cut[Any]) -> float:
    """S_ret: the best [0, 1] score the ranking had, whether the cutoff kept it or not (0.0 for
    an empty ranking)."""
    return max((score for _, score in [*cut.kept, *cut.cut]), default=0.0)
