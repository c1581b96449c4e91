"""``mmcurate export``: a release in the layout another tool reads (lmms-eval's tasks)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mmcurate.releases.reader import open_release

from .app import app

export_app = typer.Typer(help="Write a release in the layout another tool reads.", no_args_is_help=True)
app.add_typer(export_app, name="export")


@export_app.command("lmms-eval")
def lmms_eval(
    release: Annotated[Path, typer.Argument(help="a release folder: ROOT/<benchmark>/<version>")],
    out: Annotated[Path, typer.Option(help="an empty (or new) folder for the task folder")],
    text_only: Annotated[
        bool, typer.Option(help="drop every image from what the model is sent (a text-only model); the tasks say so")
    ] = False,
) -> None:
    """The release's evaluation as lmms-eval tasks (a YAML per task, the group, utils.py calling
    mmcurate's own rules), reading the release's Parquet files by absolute path."""
    import mmcurate.releases.builtin  # noqa: F401  registers the release kinds
    from mmcurate.benchmarks import get
    from mmcurate.releases.lmms_export import export_release

    opened = open_release(release)
    written = export_release(opened, get(opened.benchmark).release_kind(), out, text_only)
    if written["tasks"]:
        typer.echo(f"{len(written['tasks'])} lmms-eval tasks (group {written['group']}) -> {out}")
        typer.echo(
            f"run: lmms-eval --model openai --model_args model_version=MODEL,base_url=URL "
            f"--tasks {written['group']} --include_path {out}"
        )
    else:
        typer.echo(f"no lmms-eval task: {written['note']}")
