"""Release commands: ``verify``, ``why``, ``diff``, ``validate``, ``report``, ``history``, ``publish``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mmcurate.core.plural import counted
from mmcurate.releases.diff import diff_releases
from mmcurate.releases.reader import local_folder, open_release
from mmcurate.releases.verify import verify_release
from mmcurate.releases.why import format_decision, trace_sample

from .app import app

# a path or a URL (s3://, gs://, file://): a URL's release is fetched, checked against its marker
# (``local_folder``, in the command, so a refusal prints as one line)
ReleaseArg = Annotated[
    str, typer.Argument(metavar="RELEASE", help="a release folder: ROOT/<benchmark>/<version>, a path or URL")
]


@app.command()
def verify(release: ReleaseArg) -> None:
    """Recompute every checksum; exit 1 listing any mismatched, missing or extra file."""
    result = verify_release(local_folder(release))
    for note in result.notes:
        typer.echo(f"note: {note}")
    for problem in result.problems():
        typer.echo(problem)
    if not result.ok:
        raise SystemExit(1)  # click returns (not raises) typer.Exit when not standalone
    typer.echo(f"ok: {counted(result.checked, 'file')} verified")


@app.command()
def why(
    where: Annotated[
        str, typer.Argument(metavar="RELEASE", help="a release folder, or an evaluation run's folder (a path or URL)")
    ],
    sample_id: Annotated[str, typer.Argument(help="sample id")],
) -> None:
    """Print the decision trace of one sample and whether it is in the release; for an evaluation
    run, the item's answers and (Kestrel) the trace of every round."""
    from mmcurate.evaluation.why import is_run, item_lines

    release = local_folder(where)
    if is_run(release):
        lines = item_lines(release, sample_id)  # an unknown item is refused before any heading
        typer.echo(f"{sample_id} in the evaluation run {release}:")
        for line in lines:
            typer.echo(f"  {line}")
        return
    opened = open_release(release)
    trace = trace_sample(opened, sample_id)
    state = "IN" if trace.in_release else "NOT in"
    typer.echo(
        f"{sample_id} is {state} {opened.benchmark} {opened.version}; {counted(len(trace.decisions), 'decision')}:"
    )
    for d in trace.decisions:
        typer.echo(f"  {format_decision(d)}")


@app.command()
def diff(old: ReleaseArg, new: ReleaseArg) -> None:
    """Samples added, removed and changed between two releases: each removal's reason, each
    change's fields and the stage (and decision) that made it."""
    result = diff_releases(local_folder(old), local_folder(new))
    typer.echo(
        f"{result.old_version} -> {result.new_version}: +{len(result.added)} added, -{len(result.removed)} removed, "
        f"~{len(result.changed)} changed"
    )
    for sid in result.added:
        typer.echo(f"+ {sid}")
    for removal in result.removed:
        typer.echo(f"- {removal.sample_id}: {removal.reason}")
    for change in result.changed:
        typer.echo(change.line())


@app.command()
def validate(where: ReleaseArg) -> None:
    """Run the Great Expectations suite; write RELEASE/quality/ (results JSON, Data Docs); exit 1 on failure."""
    import mmcurate.releases.builtin  # noqa: F401  registers the release kinds
    from mmcurate.benchmarks import get
    from mmcurate.releases.validation import DATA_DOCS_DIR, validate_release

    release = local_folder(where)
    outcome = validate_release(release, get(open_release(release).benchmark).release_kind())
    for note in outcome.notes:
        typer.echo(f"note: {note}")
    for failure in outcome.failures:
        typer.echo(f"FAILED {failure}")
    typer.echo(f"Data Docs: {release / DATA_DOCS_DIR / 'index.html'}")
    if not outcome.success:
        raise SystemExit(1)  # click returns (not raises) typer.Exit when not standalone
    typer.echo("validation passed")


@app.command()
def report(release: ReleaseArg) -> None:
    """Write RELEASE/report.html: one self-contained page with plots and tables."""
    from mmcurate.releases.report import write_report

    typer.echo(str(write_report(local_folder(release))))


@app.command()
def history(
    benchmark: Annotated[str, typer.Argument(help="a benchmark's folder of versions: ROOT/<benchmark>, a path or URL")],
    evaluations: Annotated[
        list[Path] | None,
        typer.Option(
            "--evaluations",
            "-e",
            help="an evaluation run folder (as `mmcurate evaluate` writes it) for the leaderboard; repeatable",
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="folder for history.html and HISTORY.md (default: BENCHMARK)")
    ] = None,
) -> None:
    """Write the benchmark's history: every version, what each re-curation removed and whose answers removed it,
    the saturation curve, and a leaderboard of the given evaluation runs (history.html, HISTORY.md)."""
    from mmcurate.releases.history import write_history

    typer.echo(str(write_history(local_folder(benchmark, versions=True), out, evaluations)))


@app.command()
def publish(
    release: ReleaseArg,
    repo_id: Annotated[str, typer.Option("--repo-id", help="Hub dataset repo ORG/NAME")],
    target_dir: Annotated[Path | None, typer.Option("--target-dir", help="copy here instead of uploading")] = None,
) -> None:
    """Upload a verified, validated release to the Hugging Face Hub (token from HF_TOKEN)."""
    from mmcurate.releases.publish import publish as run_publish

    typer.echo(run_publish(local_folder(release), repo_id, target_dir))
