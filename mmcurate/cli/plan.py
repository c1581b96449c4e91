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
    benchmark: Annotated[Optional[str], typer.Option("--benchmark", help="deflectionbench or reflvqa "
                                                     "(default: every section of the config)")] = None,
    kb_pages: Annotated[Optional[int], typer.Option("--kb-pages", help="plan embedding a knowledge base of N pages "
                                                    "(default: counted or estimated from the configured KB)")] = None,
) -> None:
    """Expected requests, prompt and completion tokens, GPU-hours and judge cost per stage and model."""
    from mmcurate.core.config import load_config
    from mmcurate.planning.bill import BENCHMARKS, build_plan

    settings = load_config(config)
    wanted = [benchmark] if benchmark else [b for b in BENCHMARKS if getattr(settings, b) is not None]
    for name in wanted:
        typer.echo(build_plan(settings, name, samples, retention, kb_pages).render())
