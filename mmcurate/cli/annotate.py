"""``mmcurate annotate``: human verification batches for RefLVQA releases (``export``, ``import``) and
the Table 6 quality check of ReflectV releases (``export-trajectories``, ``import-trajectories``)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import app

annotate_app = typer.Typer(
    name="annotate", help="Human verification of RefLVQA citations and ReflectV trajectories: export batches, import labels.",
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


@annotate_app.command("export-trajectories")
def export_trajectories(
    release: Annotated[Path, typer.Argument(help="a ReflectV release folder")],
    out: Annotated[Path, typer.Option("--out", help="output folder for the batch, its images and key")],
    n: Annotated[int, typer.Option("--n", help="items per subset (discarded, raw, clean)")] = 100,
    seed: Annotated[int, typer.Option("--seed", help="sampling seed")] = 0,
) -> None:
    """Write a blind rating batch of trajectories from the discarded, raw and clean subsets (Table 6)."""
    from mmcurate.annotation.human.trajectories import SUBSETS, export_trajectories as export

    result = export(release, out, n=n, seed=seed)
    counts = ", ".join(f"{s} {result.items[s]} of {result.available[s]}" for s in SUBSETS)
    typer.echo(f"exported {sum(result.items.values())} items ({counts}) -> {result.jsonl}, {result.csv}")


@annotate_app.command("import-trajectories")
def import_trajectories(
    batch: Annotated[Path, typer.Argument(help="the folder export-trajectories wrote")],
    out: Annotated[Path, typer.Option("--out", help="output folder for ratings.parquet and table6.json")],
    ratings: Annotated[Optional[list[Path]], typer.Argument(help="rated CSV/JSONL files, one per annotator")] = None,
    rater: Annotated[Optional[str], typer.Option("--rater", help="a model of --config that rates every item too")] = None,
    config: Annotated[Path, typer.Option("--config", help="pipeline config naming the rater model")] = Path("configs/demo.yaml"),
) -> None:
    """Validate ratings, add the model's, write them and print Table 6 (human, model, average)."""
    from mmcurate.annotation.human.trajectories import ModelRater, import_trajectory_ratings
    from mmcurate.core.config import load_config
    from mmcurate.core.images import ImageStore
    from mmcurate.gating.models import open_models

    if rater is None:
        result = import_trajectory_ratings(batch, list(ratings or []), out)
    else:
        settings = load_config(config)
        store = ImageStore(settings.workdir / "images")
        with open_models(settings, store) as models:
            result = import_trajectory_ratings(batch, list(ratings or []), out, ModelRater(models.pool, rater, store))
    who = ", ".join(result.annotators) or "no annotator"
    typer.echo(f"ratings from {who}{' and ' + rater if rater else ''} -> {result.ratings_path}")
    typer.echo(result.markdown)
