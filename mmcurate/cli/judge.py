"""``mmcurate judge-agreement A.parquet B.parquet``: how well two graders agree."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from mmcurate.review.agreement import judge_agreement as agreement

from .app import app


@app.command("judge-agreement")
def judge_agreement(
    a: Annotated[Path, typer.Argument(help="grades of judge A (parquet with columns key, grade)")],
    b: Annotated[Path, typer.Argument(help="grades of judge B (same columns)")],
) -> None:
    """Raw agreement and Cohen's kappa over the keys both files grade."""
    result = agreement(a, b)
    kappa = "undefined" if math.isnan(result.kappa) else f"{result.kappa:.4f}"
    typer.echo(f"compared: {result.compared}")
    typer.echo(f"raw agreement: {result.raw:.4f}")
    typer.echo(f"cohen kappa: {kappa}")
    typer.echo(
        f"left out: {result.judge_errors} with JUDGE_ERROR, "
        f"{result.only_in_a} only in {a.name}, {result.only_in_b} only in {b.name}"
    )
