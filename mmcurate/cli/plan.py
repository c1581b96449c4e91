"""``mmcurate plan CONFIG``: the bill before the run, computed without calling any model."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import app


@app.command("plan")
def plan(
    config: Annotated[Path, typer.Argument(help="pipeline config (YAML)")],
    samples: Annotated[Optional[int], typer.Option("--samples", help="plan for N samples (default: the ingests "
                                                   "in the workdir, else the sources' raw record counts)")] = None,
    retention: Annotated[Optional[str], typer.Option("--retention", help="'paper' (default) or an earlier "
                                                     "release folder (a dry run's, too) to take retention from")] = None,
    benchmark: Annotated[Optional[str], typer.Option("--benchmark", help="deflectionbench, reflvqa or reflectv "
                                                     "(default: every section of the config)")] = None,
) -> None:
    """Expected requests, prompt and completion tokens, GPU-hours and judge cost per stage and model."""
    from mmcurate.core.config import load_config
    from mmcurate.core.errors import ConfigError
    from mmcurate.planning.bill import BENCHMARKS, build_plan

    settings = load_config(config)
    wanted = [benchmark] if benchmark else [b for b in BENCHMARKS if getattr(settings, b) is not None]
    if not wanted:
        raise ConfigError(f"{config} has no {', '.join(BENCHMARKS[:-1])} or {BENCHMARKS[-1]} section: nothing to plan")
    for name in wanted:
        typer.echo(build_plan(settings, name, samples, retention).render())
