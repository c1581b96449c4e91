"""``mmcurate ingest SOURCE ROOT --out DIR [--images IMGDIR] [--option KEY=VALUE ...]``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from mmcurate.core.plural import counted
from mmcurate.sources import adapter_paths, command_line_options
from mmcurate.sources.ingest import ingest as run_ingest

from .app import app


@app.command()
def ingest(
    source: Annotated[str, typer.Argument(help=f"one of {', '.join(adapter_paths())}")],
    root: Annotated[Path, typer.Argument(help="the source's data folder, in its published layout")],
    out: Annotated[Path, typer.Option("--out", help="output folder")],
    images: Annotated[Path | None, typer.Option("--images", help="image folder (default: per source)")] = None,
    option: Annotated[
        list[str] | None,
        typer.Option("--option", help="an adapter option, KEY=VALUE (repeatable), e.g. set=multi_turn for cragmm"),
    ] = None,
) -> None:
    """Read a raw source into DIR/samples.parquet, DIR/quarantine.parquet and DIR/images/."""
    from mmcurate.releases.reader import refuse_inside_release

    options = command_line_options(source, option or [])
    refuse_inside_release(out, "--out")
    # the spinner on stderr, and only on a terminal: stdout holds the summary line alone, and a
    # refusal is one line on stderr
    console = Console(stderr=True)
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        transient=True,
        console=console,
        disable=not console.is_terminal,
    ) as bar:
        task = bar.add_task(f"ingesting {source}", total=None)

        def report(kept: int, rejected: int) -> None:
            bar.update(task, description=f"ingesting {source}: {counted(kept, 'sample')}, {rejected} quarantined")

        result = run_ingest(source, root, out, images=images, options=options, progress=report)
    typer.echo(result.summary())
