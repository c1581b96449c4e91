"""``mmcurate cache compact CONFIG``: merge the parts of a shared response cache into one."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .app import app

cache_app = typer.Typer(help="The response cache.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")


@cache_app.command("compact")
def compact(
    config: Annotated[Path, typer.Argument(help="pipeline config (YAML) naming the cache (cache_url)")],
) -> None:
    """Merge the parts of a ``parts+<URL>`` cache into one part, one row per call (safe while workers write)."""
    from mmcurate.core.config import cache_location, load_config
    from mmcurate.models.cache import compact_parts

    url = load_config(config).response_cache_url
    kind, where = cache_location(url)
    if kind == "sqlite":
        typer.echo(f"{url}: one SQLite file, nothing to compact")
        return
    done = compact_parts(where)
    typer.echo(f"{url}: merged {done.parts} parts ({done.rows} rows) into one of {done.kept} rows")
