"""Agreement between two graders over the same keys: raw agreement and Cohen's kappa.

kappa = (p_o - p_e) / (1 - p_e), p_o the observed agreement, p_e the agreement expected
from each grader's label frequencies. JUDGE_ERROR rows are not grades: they are left out
and counted. When p_e == 1 (both graders used one and the same label throughout) kappa is
undefined and reported as NaN.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import polars as pl

from mmcurate.core.errors import MmcurateError

from .grades import Grade


def cohen_kappa(a: Sequence[str], b: Sequence[str]) -> float:
    if len(a) != len(b) or not a:
        raise ValueError("cohen_kappa needs two equally long, non-empty label sequences")
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b)) / n
    count_a, count_b = Counter(a), Counter(b)
    expected = sum(count_a[label] * count_b[label] for label in count_a) / (n * n)
    if math.isclose(expected, 1.0):
        return math.nan
    return (observed - expected) / (1 - expected)


@dataclass(frozen=True)
class Agreement:
    compared: int
    raw: float
    kappa: float
    only_in_a: int
    only_in_b: int
    judge_errors: int  # pairs left out because either side is JUDGE_ERROR


def _grades(path: Path) -> pl.DataFrame:
    try:
        frame = pl.read_parquet(path, columns=["key", "grade"])
    except FileNotFoundError:
        raise MmcurateError(f"{path}: no such file") from None
    except (pl.exceptions.ColumnNotFoundError, pl.exceptions.ComputeError, OSError) as exc:
        raise MmcurateError(f"{path}: needs columns key and grade ({type(exc).__name__})") from None
    frame = frame.with_columns(pl.col("key").cast(pl.Utf8), pl.col("grade").cast(pl.Utf8).str.to_uppercase())
    if frame["key"].n_unique() != frame.height:
        raise MmcurateError(f"{path}: duplicate keys")
    return frame


def agreement(path_a: Path, path_b: Path) -> Agreement:
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
