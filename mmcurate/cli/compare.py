"""``mmcurate compare-evals A B``: two evaluation runs of one release, item by item."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mmcurate.evaluation.compare import compare_runs, comparison_markdown

from .app import app


@app.command("compare-evals")
def compare_evals(
    a: Annotated[Path, typer.Argument(help="run A: an evaluation output folder (answers.parquet, table.md)")],
    b: Annotated[Path, typer.Argument(help="run B: another evaluation of the same release")],
) -> None:
    """Kept correct / corrected / broken / kept wrong from A to B, and win shares with 95% Wilson intervals."""
    typer.echo(comparison_markdown(compare_runs(a, b)), nl=False)
