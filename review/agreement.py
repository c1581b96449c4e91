"""Agreement between graders: Cohen's kappa (two), Fleiss' kappa (three or more), raw agreement,
and Pearson's r of two score sequences.

The statistics are the libraries' (cohen_kappa_score in scikit-learn, fleiss_kappa in
statsmodels.stats.inter_rater, pearsonr in scipy.stats), imported when first used. Cohen's
kappa = (p_o - p_e) / (1 - p_e), p_o the observed agreement, p_e the agreement expected from
each grader's label frequencies. Fleiss' kappa over N items, each rated by the same number n
of annotators, with n_ij the number of annotators who gave item i label j:

    P_i = (sum_j n_ij^2 - n) / (n (n - 1))      P = mean_i P_i
    p_j = sum_i n_ij / (N n)                    P_e = sum_j p_j^2
    kappa = (P - P_e) / (1 - P_e)

When p_e (P_e) == 1 (everybody used one and the same label) kappa is undefined: NaN,
reported as null. Raw agreement is the share of items on which all annotators gave the same
label. Pearson's r is undefined (NaN) when either sequence is constant.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from mmcurate.core.errors import MmcurateError
from mmcurate.core.plural import counted
from mmcurate.judging.grades import Grade

__all__ = [
    "Agreement",
    "agreement_summary",
    "cohen_kappa",
    "fleiss_kappa",
    "judge_agreement",
    "pearson",
    "raw_agreement",
]


def cohen_kappa(a: Sequence[str], b: Sequence[str]) -> float:
    """Cohen's kappa of two equally long label sequences; NaN when undefined (p_e == 1)."""
    if len(a) != len(b) or not a:
        raise ValueError("cohen_kappa needs two equally long, non-empty label sequences")
    from sklearn.metrics import cohen_kappa_score

    if len(set(a) | set(b)) == 1:  # p_e == 1: scikit-learn would warn before giving NaN
        return math.nan
    return float(cohen_kappa_score(list(a), list(b)))


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson's r of two equally long sequences (at least two values); NaN when one is constant."""
    if len(x) != len(y) or len(x) < 2:
        raise ValueError("pearson needs two equally long sequences of at least two values")
    from scipy.stats import pearsonr

    if len(set(x)) == 1 or len(set(y)) == 1:  # scipy would warn before giving NaN
        return math.nan
    return float(pearsonr(x, y).statistic)


def fleiss_kappa(ratings: Sequence[Sequence[str]]) -> float:
    """``ratings[i]``: the labels the annotators gave item i (the same count for every item, >= 2)."""
    if not ratings:
        raise ValueError("fleiss_kappa needs at least one item")
    n = len(ratings[0])
    if n < 2 or any(len(r) != n for r in ratings):
        raise ValueError("fleiss_kappa needs the same number (>= 2) of ratings for every item")
    from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss

    labels = sorted({label for item in ratings for label in item})
    if len(labels) == 1:  # P_e == 1: statsmodels would divide by zero
        return math.nan
    table = [[counts[label] for label in labels] for counts in map(Counter, ratings)]  # items x labels: n_ij
    return float(statsmodels_fleiss(table, method="fleiss"))


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
    out: dict[str, Any] = {
        "annotators": len(annotators),
        "items": len(common),
        "measure": None,
        "kappa": None,
        "raw": None,
    }
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


@dataclass(frozen=True)
class Agreement:
    compared: int
    raw: float
    kappa: float
    only_in_a: int
    only_in_b: int
    judge_errors: int  # pairs left out because either side is JUDGE_ERROR


def _grades(path: Path) -> pl.DataFrame:
    """A judge's grade file: unique keys, every grade one of ``Grade`` (any case)."""
    if path.is_dir():
        raise MmcurateError(f"{path} is a folder; give a grade file (Parquet with columns key and grade)")
    try:
        frame = pl.read_parquet(path, columns=["key", "grade"])
    except FileNotFoundError:
        raise MmcurateError(f"{path}: no such file") from None
    except (pl.exceptions.ColumnNotFoundError, pl.exceptions.ComputeError, OSError) as exc:
        raise MmcurateError(f"{path}: needs columns key and grade ({type(exc).__name__})") from None
    frame = frame.with_columns(pl.col("key").cast(pl.Utf8), pl.col("grade").cast(pl.Utf8).str.to_uppercase())
    if frame["key"].n_unique() != frame.height:
        raise MmcurateError(f"{path}: duplicate keys")
    known = [g.value for g in Grade]
    bad = frame.filter(pl.col("grade").is_null() | ~pl.col("grade").is_in(known))
    if bad.height:
        raise MmcurateError(
            f"{path}: key {bad['key'][0]!r} has grade {bad['grade'][0]!r}, not one of "
            f"{', '.join(known)} ({counted(bad.height, 'such row')})"
        )
    return frame


def judge_agreement(path_a: Path, path_b: Path) -> Agreement:
    """Two judges' grade files (Parquet, columns key and grade) compared over their common keys;
    JUDGE_ERROR rows are not grades: left out and counted."""
    a, b = _grades(path_a), _grades(path_b)
    both = a.join(b, on="key", how="inner", suffix="_b")
    error = Grade.JUDGE_ERROR.value
    graded = both.filter((pl.col("grade") != error) & (pl.col("grade_b") != error))
    if graded.height == 0:
        raise MmcurateError("no key has a grade in both files")
    left, right = graded["grade"].to_list(), graded["grade_b"].to_list()
    return Agreement(
        compared=graded.height,
        raw=sum(x == y for x, y in zip(left, right)) / graded.height,
        kappa=cohen_kappa(left, right),
        only_in_a=a.height - both.height,
        only_in_b=b.height - both.height,
        judge_errors=both.height - graded.height,
    )
