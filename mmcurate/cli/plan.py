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
    benchmark: Annotated[Optional[str], typer.Option("--benchmark", help="a benchmark of the config "
                                                     "(default: every section of the config)")] = None,
) -> None:
    """Expected requests, prompt and completion tokens, GPU-hours and judge cost per stage and model."""
    from mmcurate.benchmarks import BENCHMARKS, get
    from mmcurate.core.config import load_config
    from mmcurate.core.errors import ConfigError

    settings = load_config(config)
    if benchmark is not None:
        settings.section(get(benchmark).name)
    wanted = [benchmark] if benchmark else list(settings.sections())
    if not wanted:
        raise ConfigError(f"{config} has no benchmark section ({', '.join(BENCHMARKS)}): nothing to plan")
    for name in wanted:
        planner = get(name).planner()
        if planner is None:
            typer.echo(f"{name}: mmcurate has no cost model of its curation yet")
            continue
        typer.echo(planner(settings, samples, retention).render())
