"""The one Typer application every command module registers on."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="mmcurate",
    help="Curate, validate and maintain retrieval-dependent multimodal benchmarks.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
