"""``mmcurate annotate``: labelling batches for people, and agreement.

``export`` / ``import`` without ``--evaluation``: RefLVQA citation verification (the
release's cited sentences). With ``--evaluation DIR`` (repeatable, one per evaluated model):
the judge's decisions of those evaluation runs, for checking the judge against people
(DeflectionBench Table 7, RefLVQA evaluator correlations). ``export-trajectories`` /
``import-trajectories``: the Table 6 quality check of ReflectV releases. Each takes
``--format label-studio`` (a Label Studio project; its JSON exports read back), and
``push-label-studio`` creates an exported project on a running Label Studio.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mmcurate.core.plural import counted

from .app import app
from .run import config_or_demo

annotate_app = typer.Typer(
    name="annotate",
    help="Labelling batches for people: citation verification, judge decisions to check, "
    "ReflectV trajectories to rate.",
    no_args_is_help=True,
)
app.add_typer(annotate_app, name="annotate")


def _judges(release: Path):
    """The review of the evaluation judge of ``release``'s benchmark (``mmcurate.benchmarks``)."""
    import mmcurate.review.builtin  # noqa: F401  registers the judge reviews
    from mmcurate.benchmarks import get
    from mmcurate.releases.reader import open_release

    return get(open_release(release).benchmark).judges()


SeedOpt = Annotated[int, typer.Option("--seed", help="sampling seed")]
ForceOpt = Annotated[
    bool, typer.Option("--force", help="replace a batch in --out that people already labelled (refused without it)")
]
FormatOpt = Annotated[
    str,
    typer.Option(
        "--format",
        help="csv (batch.csv / batch.jsonl, filled in by hand) or label-studio (also a Label Studio "
        "project: tasks.json, a labeling config *.xml, images/; import reads its JSON exports)",
    ),
]
FORMATS = ("csv", "label-studio")
ImportForceOpt = Annotated[
    bool,
    typer.Option(
        "--force", help="replace the results of an earlier import in --out (refused without it: imports are not merged)"
    ),
]
EvaluationOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--evaluation",
        help="an evaluation output folder (answers.parquet); repeat: judge decisions instead of citations",
    ),
]


@annotate_app.command("export")
def export(
    release: Annotated[Path, typer.Argument(help="the release (RefLVQA for citations; the evaluated one for judges)")],
    out: Annotated[Path, typer.Option("--out", help="output folder for batch.jsonl and batch.csv")],
    n: Annotated[
        int, typer.Option("--n", help="citations: items; judges: decisions (RefLVQA: answers) per model")
    ] = 100,
    seed: SeedOpt = 0,
    evaluation: EvaluationOpt = None,
    rejected: Annotated[
        int | None,
        typer.Option(
            "--rejected",
            help="citations: uncited judged documents shown per item, drawn at random and weighted back "
            "at import (default: all of them)",
        ),
    ] = None,
    force: ForceOpt = False,
    format: FormatOpt = "csv",
) -> None:
    """Write a labelling batch to DIR/batch.jsonl and DIR/batch.csv (and, with --format
    label-studio, the Label Studio project: DIR/tasks.json, DIR/<review>.xml, DIR/images/)."""
    from mmcurate.review import label_studio_judges
    from mmcurate.review.reflvqa import label_studio as label_studio_citations
    from mmcurate.review.reflvqa.citations import export_batch

    _check_format(format)
    if evaluation:
        review = _judges(release)
        if format == "label-studio":
            result = label_studio_judges.export_project(review, release, evaluation, out, n=n, seed=seed, force=force)
        else:
            result = review.export(release, evaluation, out, n=n, seed=seed, force=force)
        per_model = ", ".join(f"{m}: {k}" for m, k in result.per_model.items())
        typer.echo(
            f"exported {result.items} {result.benchmark} judge items ({result.unit} per model: {per_model}) "
            f"-> {result.jsonl}, {result.csv}"
        )
        _project_note(format, out)
        return
    make = label_studio_citations.export_project if format == "label-studio" else export_batch
    batch = make(release, n, out, seed=seed, rejected=rejected, force=force)
    note = f" (only {batch.available} available)" if batch.items < n else ""
    typer.echo(f"exported {counted(batch.items, 'item')}{note} -> {batch.jsonl}, {batch.csv}")
    _project_note(format, out)
    typer.echo(f"sampling: {batch.sampling}")


def _project_note(format: str, out: Path) -> None:
    if format == "label-studio":
        from mmcurate.review.label_studio import TASKS, project_config

        typer.echo(
            f"Label Studio project: {project_config(out)} (labeling config), {out / TASKS} (tasks); "
            f"review it: make review-ui REVIEW={out}"
        )


def _check_format(format: str) -> None:
    """Refuse an unknown format; before a Label Studio import, remove (and name) the temporary
    folders killed imports left behind."""
    from mmcurate.core.errors import MmcurateError
    from mmcurate.review.label_studio import remove_stale_temporaries

    if format not in FORMATS:
        raise MmcurateError(f"--format {format!r}: one of {', '.join(FORMATS)}")
    for folder in remove_stale_temporaries() if format == "label-studio" else []:
        typer.echo(
            f"mmcurate: removed {folder}, the temporary folder of a Label Studio import that was killed", err=True
        )


@annotate_app.command("import")
def import_(
    release: Annotated[Path, typer.Argument(help="the release the batch came from")],
    labels: Annotated[
        list[Path],
        typer.Argument(
            help="labelled CSV/JSONL files, one per annotator; with --format label-studio, Label Studio JSON exports"
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="output folder (not inside the release)")],
    evaluation: EvaluationOpt = None,
    format: FormatOpt = "csv",
    force: ImportForceOpt = False,
) -> None:
    """Validate labels; write agreement (and, for citations, DIR/human_verified.parquet); print it."""
    from mmcurate.review import label_studio_judges
    from mmcurate.review.reflvqa import label_studio as label_studio_citations
    from mmcurate.review.reflvqa.citations import SAMPLING, import_labels

    _check_format(format)
    if evaluation:
        review = _judges(release)
        if format == "label-studio":
            judged = label_studio_judges.import_project(review, release, evaluation, labels, out, force)
        else:
            judged = review.import_labels(release, evaluation, labels, out, force)
        typer.echo(
            f"{counted(judged.items, 'item')} from {counted(len(judged.annotators), 'annotator')} "
            f"({', '.join(judged.annotators)}) -> {judged.path}"
        )
        typer.echo(judged.markdown.rstrip())
        return
    result = (label_studio_citations.import_project if format == "label-studio" else import_labels)(
        release, list(labels), out, force
    )
    typer.echo(
        f"{counted(result.items, 'item')} from {counted(len(result.annotators), 'annotator')} ({', '.join(result.annotators)}); "
        f"{result.verified} human-verified -> {result.path}"
    )
    for question, summary in result.agreement.items():
        if summary["measure"] is None:
            typer.echo(f"  {question}: agreement needs two annotators on common items")
            continue
        kappa = "undefined" if summary["kappa"] is None else f"{summary['kappa']:.3f}"
        typer.echo(
            f"  {question}: {summary['measure']} kappa {kappa}, raw agreement {summary['raw']:.3f} "
            f"over {counted(summary['items'], 'item')}"
        )
    for row in result.table3:
        share = "–" if row["share"] is None else f"{100 * row['share']:.1f}%"
        typer.echo(f"  {row['criterion']}: {share} of {row['n']}")
    for row in result.entailment:
        if row["pairs"]:
            f1 = "undefined" if row["f1"] is None else f"{row['f1']:.3f}"
            weighted = ", inverse-probability weighted" if row["weighted"] else ""
            typer.echo(
                f"  entailment F1 ({row['modality']}, {row['judge']}): {f1} over {row['pairs']} labelled pairs"
                f"{weighted}"
            )
    typer.echo(f"  sampling: {SAMPLING}")


@annotate_app.command("push-label-studio")
def push_label_studio(
    review: Annotated[Path, typer.Argument(help="the folder `annotate export --format label-studio` wrote")],
    url: Annotated[str, typer.Option("--url", help="the running Label Studio")] = "http://127.0.0.1:8080",
    wait: Annotated[
        float,
        typer.Option(
            "--wait",
            help="seconds to wait for a Label Studio that is up but not ready (answers 5xx, resets); nothing "
            "listening at --url is an error at once",
        ),
    ] = 900.0,
    server_pid: Annotated[
        int | None,
        typer.Option(
            "--server-pid",
            help="the Label Studio process just started: while it runs, nothing listening means it is "
            "still migrating its database, and is waited for too",
        ),
    ] = None,
) -> None:
    """Create the exported project on a running Label Studio (its API key from LABEL_STUDIO_API_KEY,
    else REVIEW/.label-studio/token)."""
    from mmcurate.review.label_studio import push_project

    project = push_project(review, url, _api_key(review), wait=wait, server_pid=server_pid)
    typer.echo(f"project {project}: {url.rstrip('/')}/projects/{project}/data")


def _api_key(review: Path) -> str:
    """LABEL_STUDIO_API_KEY, else the token `serve-label-studio` keeps in the review folder."""
    import os

    from mmcurate.core.errors import MmcurateError
    from mmcurate.review.label_studio import SERVER_DATA

    kept = review / SERVER_DATA / "token"
    token = os.environ.get("LABEL_STUDIO_API_KEY") or (kept.read_text().strip() if kept.is_file() else "")
    if not token:
        raise MmcurateError(
            f"set LABEL_STUDIO_API_KEY to the Label Studio user's API key (Account & Settings); "
            f"{kept} holds it where `make review-ui` ran"
        )
    return token


@annotate_app.command("serve-label-studio")
def serve_label_studio(
    review: Annotated[Path, typer.Argument(help="the folder `annotate export --format label-studio` wrote")],
    label_studio: Annotated[
        Path, typer.Option("--label-studio", help="the label-studio command (make review-setup installs it)")
    ],
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="port on 127.0.0.1")] = 8080,
    wait: Annotated[float, typer.Option("--wait", help="seconds to wait for Label Studio to be ready")] = 1800.0,
) -> None:
    """Run Label Studio on 127.0.0.1 only (SQLite in REVIEW/.label-studio) with REVIEW's project
    until Ctrl-C; what `make review-ui` runs. The password is LABEL_STUDIO_PASSWORD, else a random
    one printed once and kept in REVIEW/.label-studio/password (0600, like the API token)."""
    from mmcurate.review.label_studio import serve

    code = serve(review, label_studio, port, wait, typer.echo)
    if code:
        raise typer.Exit(code)


@annotate_app.command("pull-label-studio")
def pull_label_studio(
    review: Annotated[Path, typer.Argument(help="the folder `annotate export --format label-studio` wrote")],
    out: Annotated[Path, typer.Option("--out", help="the JSON export to write (what `annotate import` reads)")],
    url: Annotated[str, typer.Option("--url", help="the running Label Studio")] = "http://127.0.0.1:8080",
) -> None:
    """Save the project's JSON export with each annotator's e-mail (Label Studio's Export button
    gives only user ids; the import names those annotator-<id>). API key: LABEL_STUDIO_API_KEY,
    else REVIEW/.label-studio/token."""
    from mmcurate.review.label_studio import pull_export

    project, emails = pull_export(review, url, _api_key(review), out)
    typer.echo(f"project {project}: annotations of {', '.join(emails) or 'nobody yet'} -> {out}")


@annotate_app.command("export-trajectories")
def export_trajectories(
    release: Annotated[Path, typer.Argument(help="a ReflectV release folder")],
    out: Annotated[Path, typer.Option("--out", help="output folder for the batch, its images and key")],
    n: Annotated[int, typer.Option("--n", help="items per subset (discarded, raw, clean)")] = 100,
    seed: SeedOpt = 0,
    force: ForceOpt = False,
    format: FormatOpt = "csv",
) -> None:
    """Write a blind rating batch of trajectories from the discarded, raw and clean subsets (Table 6)."""
    from mmcurate.review.reflectv import label_studio as label_studio_trajectories
    from mmcurate.review.reflectv.trajectories import SUBSETS, export_trajectories

    _check_format(format)
    export = label_studio_trajectories.export_project if format == "label-studio" else export_trajectories
    result = export(release, out, n=n, seed=seed, force=force)
    counts = ", ".join(f"{s} {result.drawn[s]} of {result.available[s]}" for s in SUBSETS)
    typer.echo(
        f"exported {counted(result.items, 'item')}, each dialogue once (drawn: {counts}) -> "
        f"{result.jsonl}, {result.csv}"
    )
    _project_note(format, out)


@annotate_app.command("import-trajectories")
def import_trajectories(
    batch: Annotated[Path, typer.Argument(help="the folder export-trajectories wrote")],
    out: Annotated[Path, typer.Option("--out", help="output folder for ratings.parquet and table6.json")],
    ratings: Annotated[
        list[Path] | None,
        typer.Argument(
            help="rated CSV/JSONL files, one per annotator; with --format label-studio, Label Studio JSON exports"
        ),
    ] = None,
    rater: Annotated[
        str | None,
        typer.Option(
            "--rater", help="a model of --config, or a YAML file with one model spec, that rates every item too"
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="pipeline config naming the rater model (default: the bundled demo.yaml with the workdir "
            "./.mmcurate of the current directory)",
        ),
    ] = None,
    format: FormatOpt = "csv",
    force: ImportForceOpt = False,
) -> None:
    """Validate ratings, add the model's, write them and print Table 6 (human, model, average)."""
    from mmcurate.core.config import load_config
    from mmcurate.judging.session import open_models
    from mmcurate.review.reflectv import label_studio as label_studio_trajectories
    from mmcurate.review.reflectv.trajectories import ModelRater, import_trajectory_ratings

    _check_format(format)
    read = label_studio_trajectories.import_project if format == "label-studio" else import_trajectory_ratings
    if rater is None:
        result = read(batch, list(ratings or []), out, force=force)
    else:
        settings = load_config(config_or_demo(config))
        rater = settings.add_model(rater).name  # a model file is named by the model it defines
        store = settings.image_store()
        with open_models(settings, store) as models:
            result = read(batch, list(ratings or []), out, ModelRater(models.pool, rater, store), force=force)
    who = ", ".join(result.annotators) or "no annotator"
    typer.echo(f"ratings from {who}{' and ' + rater if rater else ''} -> {result.ratings_path}")
    if result.rater_problem:
        typer.echo(f"mmcurate: warning: {result.rater_problem}; its column averages the items it rated", err=True)
    typer.echo(result.markdown)
