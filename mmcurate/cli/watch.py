"""``mmcurate watch RELEASE --catalog CATALOG``: new models for a release, the bill of
re-curating with them, and (``--run``) the re-curation, verified and published."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer

from .app import app
from .run import MaxCallsOpt, MaxCostOpt, _prefect_defaults
from .session import run_flow


@app.command("watch")
def watch(
    release: Annotated[Path, typer.Argument(help="the release to keep current")],
    catalog: Annotated[
        str,
        typer.Option(
            "--catalog", help="a YAML catalog of model specs, or an OpenAI-compatible server: http://host:port/v1"
        ),
    ],
    config: Annotated[Path | None, typer.Option("--config", help="default: the release's own config")] = None,
    run: Annotated[bool, typer.Option("--run", help="re-curate with the new models, verify, publish")] = False,
    max_calls: MaxCallsOpt = None,
    max_cost: MaxCostOpt = None,
    target_dir: Annotated[
        Path | None,
        typer.Option("--target-dir", help="with --run: copy the verified release here (what an upload would send)"),
    ] = None,
    repo_id: Annotated[
        str | None,
        typer.Option("--repo-id", help="with --run: upload the verified release to this Hub dataset (ORG/NAME)"),
    ] = None,
    notify: Annotated[
        str | None,
        typer.Option("--notify", help="with --run: a Prefect notification block (type-slug/name) told the outcome"),
    ] = None,
) -> None:
    """Propose the catalog's models the release was not curated with and print the plan of
    re-curating with them; with --run, re-curate within the budget, verify and publish."""
    from mmcurate.planning.recuration import Budget
    from mmcurate.planning.watch import propose

    Budget(max_calls, max_cost)
    if not run:
        if target_dir or repo_id or notify:
            raise typer.BadParameter("--target-dir, --repo-id and --notify need --run")
        with tempfile.TemporaryDirectory(prefix="mmcurate-watch-") as specs:
            proposal = propose(release, catalog, config, Path(specs))
            typer.echo(proposal.render(), nl=False)
            if proposal.plan is not None:
                Budget(max_calls, max_cost).refuse_over(proposal.plan)
        return
    from mmcurate.flows.watch import watch as watch_flow

    _prefect_defaults()
    outcome = run_flow(
        lambda: watch_flow(
            release=str(release.resolve()),
            catalog=catalog if catalog.startswith(("http://", "https://")) else str(Path(catalog).resolve()),
            config=str(config.resolve()) if config else None,
            run=True,
            max_calls=max_calls,
            max_cost=max_cost,
            target_dir=str(target_dir.resolve()) if target_dir else None,
            repo_id=repo_id,
            notify_block=notify,
        )
    )
    typer.echo(outcome["published"] or outcome["recurated"] or "no new model: nothing re-curated")
