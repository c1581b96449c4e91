"""Inter-annotator agreement: Cohen's kappa (two annotators), Fleiss' kappa (three or more).

Cohen's kappa is ``gating.agreement.cohen_kappa`` (one implementation in the project).
Fleiss' kappa over N items, each rated by the same number n of annotators, with n_ij the
number of annotators who gave item i label j:

    P_i = (sum_j n_ij^2 - n) / (n (n - 1))      P = mean_i P_i
    p_j = sum_i n_ij / (N n)                    P_e = sum_j p_j^2
    kappa = (P - P_e) / (1 - P_e)

When P_e == 1 (everybody used one and the same label) kappa is undefined: NaN, reported as
null. Raw agreement is the share of items on which all annotators gave the same label.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from mmcurate.gating.agreement import cohen_kappa

__all__ = ["agreement_summary", "cohen_kappa", "fleiss_kappa", "raw_agreement"]


def fleiss_kappa(ratings: Sequence[Sequence[str]]) -> float:
    """``ratings[i]``: the labels the annotators gave item i (the same count for every item, >= 2)."""
    if not ratings:
        raise ValueError("fleiss_kappa needs at least one item")
    n = len(ratings[0])
    if n < 2 or any(len(r) != n for r in ratings):
        raise ValueError("fleiss_kappa needs the same number (>= 2) of ratings for every item")
    big_n = len(ratings)
    totals: Counter[str] = Counter()
    p_items = 0.0
    for labels in ratings:
        counts = Counter(labels)
        totals.update(counts)
        p_items += (sum(c * c for c in counts.values()) - n) / (n * (n - 1))
    p_bar = p_items / big_n
    p_e = sum((c / (big_n * n)) ** 2 for c in totals.values())
    if math.isclose(p_e, 1.0):
        return math.nan
    return (p_bar - p_e) / (1 - p_e)


def raw_agreement(ratings: Sequence[Sequence[str]]) -> float:
    if not ratings:
        raise ValueError("raw_agreement needs at least one item")
    return sum(len(set(r)) == 1 for r in ratings) / len(ratings)


def agreement_summary(labels: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """Agreement over the items every annotator labelled.

    ``labels``: annotator -> {item_id: label}. Returns ``annotators``, ``items`` (compared),
    ``measure`` ("cohen", "fleiss" or None with fewer than two annotators), ``kappa`` (None
    when undefined) and ``raw``.
    """
    annotators = sorted(labels)
    common = sorted(set.intersection(*(set(labels[a]) for a in annotators))) if annotators else []
    out: dict[str, Any] = {"annotators": len(annotators), "items": len(common), "measure": None, "kappa": None, "raw": None}
    if len(annotators) < 2 or not common:
        return out
    ratings = [[labels[a][item] for a in annotators] for item in common]
    if len(annotators) == 2:
        kappa = cohen_kappa([r[0] for r in ratings], [r[1] for r in ratings])
        out["measure"] = "cohen"
    else:
        kappa = fleiss_kappa(ratings)
        out["measure"] = "fleiss"
    out["kappa"] = None if math.isnan(kappa) else kappa
    out["raw"] = raw_agreement(ratings)
    return out
