"""``mmcurate run BENCHMARK --config FILE``, ``evaluate`` and ``recurate``: real Prefect flow runs.

Arguments and the config are checked before Prefect starts, so a mistake is one line at
once; the flow then runs through ``session.run_flow`` (its own temporary Prefect API,
prompt interrupts, exit codes).
"""
from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from .app import app
from .session import run_flow

run_app = typer.Typer(help="Run a curation flow (a real Prefect flow run).", no_args_is_help=True)
app.add_typer(run_app, name="run")

ConfigOpt = Annotated[Path, typer.Option("--config", help="pipeline config (YAML)")]
VersionOpt = Annotated[Optional[str], typer.Option("--version", help="release version (default: the config's)")]
IncompleteOpt = Annotated[bool, typer.Option(
    "--allow-incomplete", help="publish even if failed model calls held samples out (the card says so)")]


def _prefect_defaults() -> None:
    """No telemetry, no hub, no library progress bars; give the API server time to start on a
    busy machine."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def _prepare(config: Path, benchmark: str, version: str | None) -> Any:
    """Everything a curation run can refuse before it starts: the config, its sources, a
    published version with other settings; returns the task runner the config asks for."""
    from mmcurate.core.config import load_config
    from mmcurate.releases.rerun import refuse_changed_version
    from mmcurate.sources import check_source
    from mmcurate.tasks.runners import make_task_runner

    settings = load_config(config)
    section = settings.section(benchmark)
    settings.check_sources(benchmark)
    for where, source in settings.sources_of(benchmark):
        check_source(source.name, source.options, where)
    refuse_changed_version(settings, benchmark, version or section.version)
    return make_task_runner(settings.task_runner)


def _curate(benchmark: str, config: Path, version: str | None, allow_incomplete: bool) -> None:
    """Run the curation flow ``flows/<benchmark>.py`` on the configured task runner."""
    _prefect_defaults()
    runner = _prepare(config, benchmark, version)
    flow = getattr(importlib.import_module(f"mmcurate.flows.{benchmark}"), benchmark).with_options(task_runner=runner)
    typer.echo(run_flow(lambda: flow(config=str(config.resolve()), version=version, allow_incomplete=allow_incomplete)))


@run_app.command("deflectionbench")
def run_deflectionbench(config: ConfigOpt = Path("configs/demo.yaml"), version: VersionOpt = None,
                        allow_incomplete: IncompleteOpt = False) -> None:
    """Curate VLM-DeflectionBench (Algorithm 1) and publish a validated release."""
    _curate("deflectionbench", config, version, allow_incomplete)


@run_app.command("reflvqa")
def run_reflvqa(config: ConfigOpt = Path("configs/demo.yaml"), version: VersionOpt = None,
                allow_incomplete: IncompleteOpt = False) -> None:
    """Curate RefLVQA (long-form visual QA with sentence-level citations)."""
    _curate("reflvqa", config, version, allow_incomplete)


@run_app.command("reflectv")
def run_reflectv(config: ConfigOpt = Path("configs/demo.yaml"), version: VersionOpt = None,
                 allow_incomplete: IncompleteOpt = False) -> None:
    """Curate ReflectV (reflective, visually grounded multi-turn trajectories, MIRROR)."""
    _curate("reflectv", config, version, allow_incomplete)


@app.command("evaluate")
def evaluate(
    release: Annotated[Path, typer.Argument(help="a DeflectionBench or RefLVQA release folder")],
    model: Annotated[str, typer.Option("--model", help="a model name from --config, or a YAML file with one model spec")],
    config: ConfigOpt = Path("configs/demo.yaml"),
    scenario: Annotated[Optional[list[str]], typer.Option("--scenario", help="repeat; default: all four")] = None,
    negatives: Annotated[Optional[list[int]], typer.Option("--negatives", help="n for realistic (1-10); repeat")] = None,
    abstention: Annotated[Optional[list[str]], typer.Option(
        "--abstention", help="none, soft, moderate or severe; repeat for a strictness table")] = None,
    strictness_sweep: Annotated[bool, typer.Option(
        "--strictness-sweep", help="all four abstention levels and the table across them")] = False,
    modality_analysis: Annotated[bool, typer.Option(
        "--modality-analysis", help="also realistic with text / image / multimodal negatives (Table 5)")] = False,
    out: Annotated[Optional[Path], typer.Option(help="output folder (default under the workdir)")] = None,
    system: Annotated[str, typer.Option(
        "--system", help="answering system: plain, or verify-first (CRUISE's gate; DeflectionBench)")] = "plain",
) -> None:
    """Evaluate one model: DeflectionBench's four scenarios, or a RefLVQA RAG run (by the release)."""
    from mmcurate.core.config import load_config
    from mmcurate.core.errors import MmcurateError
    from mmcurate.evaluation.scenarios import SCENARIOS, check_system, plan_jobs
    from mmcurate.gating.prompts import DEFAULT_ABSTENTION, STRICTNESS_LEVELS
    from mmcurate.releases.reader import open_release, refuse_inside_release

    # every input is checked before Prefect starts: a bad one is one line, exit 2
    bench = open_release(release)
    if out is not None:
        refuse_inside_release(out, "--out")
    load_config(config).add_model(model)
    if strictness_sweep and abstention:
        raise MmcurateError("give --abstention levels or --strictness-sweep, not both")
    levels = list(STRICTNESS_LEVELS) if strictness_sweep else (abstention or [DEFAULT_ABSTENTION])
    check_system(system, bench.benchmark)
    if bench.benchmark == "reflvqa":
        given = [name for name, value in (("--scenario", scenario), ("--negatives", negatives),
                                          ("--abstention", abstention), ("--strictness-sweep", strictness_sweep),
                                          ("--modality-analysis", modality_analysis)) if value]
        if given:
            raise MmcurateError(f"{', '.join(given)}: DeflectionBench options; {release} is a RefLVQA release")
    scenarios, counts = scenario or list(SCENARIOS), negatives or [1, 2, 5, 10]
    plan_jobs(scenarios, counts, levels, modality_analysis)

    _prefect_defaults()
    from mmcurate.flows.evaluate import evaluate_release

    run_flow(lambda: evaluate_release(
        release=str(release.resolve()), model=model, config=str(config.resolve()),
        scenarios=scenarios, n_negatives=counts, abstention=levels,
        modality_analysis=modality_analysis, out=str(out.resolve()) if out else None, system=system))


@app.command("recurate")
def recurate(
    release: Annotated[Path, typer.Argument(help="the DeflectionBench release to re-curate")],
    add_model: Annotated[list[str], typer.Option("--add-model", help="model name or YAML spec file; repeat")],
    config: Annotated[Optional[Path], typer.Option("--config", help="default: the release's own config")] = None,
    version: VersionOpt = None,
    allow_incomplete: IncompleteOpt = False,
) -> None:
    """Gate a release with new models only; publish the next minor version beside it (or under the
    config's releases_root) with its diff."""
    _prefect_defaults()
    from mmcurate.releases.reader import open_release

    open_release(release)
    from mmcurate.flows.recurate import recurate as recurate_flow

    typer.echo(run_flow(lambda: recurate_flow(release=str(release.resolve()), add_model=add_model,
                                              config=str(config.resolve()) if config else None, version=version,
                                              allow_incomplete=allow_incomplete)))
