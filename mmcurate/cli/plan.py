"""``mmcurate plan CONFIG``: the bill before the run, computed without calling any model; with
``--evaluate RELEASE --model M``, the bill of an evaluation."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated

import typer

from .app import app
from .run import FLAGS, QueriesOpt, SettingOpt


@app.command("plan")
def plan(
    config: Annotated[Path, typer.Argument(help="pipeline config (YAML)")],
    samples: Annotated[
        int | None,
        typer.Option(
            "--samples",
            help="plan for N samples (default: the ingests in the workdir, else the sources' raw record counts)",
        ),
    ] = None,
    retention: Annotated[
        str | None,
        typer.Option(
            "--retention",
            help="'paper' (default) or an earlier release folder (a dry run's, too) to take retention from",
        ),
    ] = None,
    benchmark: Annotated[
        str | None, typer.Option("--benchmark", help="a benchmark of the config (default: every section of the config)")
    ] = None,
    evaluate: Annotated[
        Path | None,
        typer.Option("--evaluate", help="plan the evaluation of --model on this release instead of a curation"),
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="with --evaluate: the model evaluated")] = None,
    setting: SettingOpt = None,
    queries: QueriesOpt = None,
    kb_pages: Annotated[
        int | None,
        typer.Option(
            "--kb-pages",
            help="plan embedding a knowledge base of N pages (default: counted or estimated from the configured KB)",
        ),
    ] = None,
) -> None:
    """Expected requests, prompt and completion tokens, GPU-hours and judge cost per stage and model."""
    import mmcurate.evaluation.builtin  # noqa: F401  registers the option checks
    import mmcurate.planning.builtin  # noqa: F401  registers the planners
    from mmcurate.benchmarks import BENCHMARKS, get
    from mmcurate.core.config import load_config
    from mmcurate.core.errors import ConfigError, MmcurateError

    settings = load_config(config)
    if evaluate is not None or model is not None:
        if evaluate is None or model is None:
            raise MmcurateError("plan an evaluation with both --evaluate RELEASE and --model MODEL")
        from mmcurate.releases.reader import open_release

        release = open_release(evaluate)
        chosen = get(release.benchmark)
        if chosen.evaluation is None:
            raise MmcurateError(f"mmcurate has no evaluation of {chosen.name} releases")
        given = {k: v for k, v in {"settings": setting, "queries": queries}.items() if v}
        options = chosen.evaluation.arguments(chosen.name, given, FLAGS)
        typer.echo(chosen.evaluation.planner(chosen.name)(settings, release, model, options).render())
        return
    if setting or queries:
        raise MmcurateError("--setting and --queries plan an evaluation: give --evaluate RELEASE --model MODEL")
    if benchmark is not None:
        settings.section(get(benchmark).name)
    wanted = [benchmark] if benchmark else list(settings.sections())
    if not wanted:
        raise ConfigError(f"{config} has no benchmark section ({', '.join(BENCHMARKS)}): nothing to plan")
    failed: list[str] = []
    for name in wanted:  # every benchmark is planned: one that cannot be does not stop the others
        planner = get(name).planner()
        if planner is None:
            typer.echo(f"{name}: mmcurate has no cost model of its curation yet")
            continue
        extra = {"kb_pages": kb_pages} if kb_pages is not None else {}
        if extra and "kb_pages" not in inspect.signature(planner).parameters:
            raise MmcurateError(f"--kb-pages sizes the knowledge base DeflectionBench mines; {name} mines none")
        try:
            typer.echo(planner(settings, samples, retention, **extra).render())
        except MmcurateError as exc:
            failed.append(f"{name}: {exc}")
    if failed:
        raise MmcurateError(f"not planned: {'; '.join(failed)}")
