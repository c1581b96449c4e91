"""``mmcurate run BENCHMARK --config FILE``: a real Prefect flow run of a curation pipeline."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import app

run_app = typer.Typer(help="Run a curation flow (a real Prefect flow run).", no_args_is_help=True)
app.add_typer(run_app, name="run")

ConfigOpt = Annotated[Path, typer.Option("--config", help="pipeline config (YAML)")]
VersionOpt = Annotated[Optional[str], typer.Option("--version", help="release version (default: the config's)")]


def _prefect_defaults() -> None:
    """No telemetry, no hub; give the ephemeral API server time to start on a busy machine."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


@run_app.command("deflectionbench")
def run_deflectionbench(config: ConfigOpt = Path("configs/demo.yaml"), version: VersionOpt = None) -> None:
    """Curate VLM-DeflectionBench (Algorithm 1) and publish a validated release."""
    _prefect_defaults()
    from mmcurate.flows.deflectionbench import deflectionbench

    typer.echo(deflectionbench(config=str(config.resolve()), version=version))


@run_app.command("reflvqa")
def run_reflvqa(config: ConfigOpt = Path("configs/demo.yaml"), version: VersionOpt = None) -> None:
    """Curate RefLVQA (long-form visual QA with sentence-level citations)."""
    _prefect_defaults()
    from mmcurate.flows.reflvqa import reflvqa

    typer.echo(reflvqa(config=str(config.resolve()), version=version))
