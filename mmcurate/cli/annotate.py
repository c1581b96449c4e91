"""``mmcurate annotate export|import``: human verification batches for RefLVQA releases."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .app import app

annotate_app = typer.Typer(
    name="annotate", help="Human verification of RefLVQA citations: export batches, import labels.",
    no_args_is_help=True,
)
app.add_typer(annotate_app, name="annotate")


@annotate_app.command("export")
def export(
    release: Annotated[Path, typer.Argument(help="a RefLVQA release folder (with data/qa-*.parquet)")],
    n: Annotated[int, typer.Option("--n", help="number of (sentence, cited documents) items")],
    out: Annotated[Path, typer.Option("--out", help="output folder for batch.jsonl and batch.csv")],
    seed: Annotated[int, typer.Option("--seed", help="sampling seed")] = 0,
) -> None:
    """Write a labelling batch of N cited sentences to DIR/batch.jsonl and DIR/batch.csv."""
    from mmcurate.annotation.human.citations import export_batch

    result = export_batch(release, n, out, seed=seed)
    note = f" (only {result.available} available)" if result.items < n else ""
    typer.echo(f"exported {result.items} items{note} -> {result.jsonl}, {result.csv}")


@annotate_app.command("import")
def import_(
    release: Annotated[Path, typer.Argument(help="the RefLVQA release folder the batch came from")],
    labels: Annotated[list[Path], typer.Argument(help="labelled CSV/JSONL files, one per annotator")],
    out: Annotated[Path, typer.Option("--out", help="output folder (not inside the release)")],
) -> None:
    """Validate labels; write DIR/human_verified.parquet and DIR/agreement.json; print agreement."""
    from mmcurate.annotation.human.citations import import_labels

    result = import_labels(release, list(labels), out)
    typer.echo(
        f"{result.items} items from {len(result.annotators)} annotator(s) ({', '.join(result.annotators)}); "
        f"{result.verified} human-verified -> {result.path}"
    )
    for question, summary in result.agreement.items():
        if summary["measure"] is None:
            typer.echo(f"  {question}: agreement needs two annotators on common items")
            continue
        kappa = "undefined" if summary["kappa"] is None else f"{summary['kappa']:.3f}"
        typer.echo(
            f"  {question}: {summary['measure']} kappa {kappa}, raw agreement {summary['raw']:.3f} "
            f"over {summary['items']} items"
        )
