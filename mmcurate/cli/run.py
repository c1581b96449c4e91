"""``mmcurate run BENCHMARK --config FILE``: a real Prefect flow run of a curation pipeline."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import app

run_app = typer.Typer(help="Run a curation flow (a real Prefect flow run).", no_args_is_help=True)
app.add_typer(run_app, name="run")

ConfigOpt = Annotated[Path, typer.Option("--config", help="pipeline config (YAML)")]
VersionOpt = Annotated[Optional[str], typer.Option("--version", help="release version (default: the config's)")]


def _prefect_defaults() -> None:
    """No telemetry, no hub; give the ephemeral API server time to start on a busy machine."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _runner(config: Path):
    """The task runner the config asks for (threads, Dask, Ray)."""
    from mmcurate.core.config import load_config
    from mmcurate.tasks.runners import make_task_runner

    return make_task_runner(load_config(config).task_runner)


@run_app.command("deflectionbench")
def run_deflectionbench(config: ConfigOpt = Path("configs/demo.yaml"), version: VersionOpt = None) -> None:
    """Curate VLM-DeflectionBench (Algorithm 1) and publish a validated release."""
    _prefect_defaults()
    from mmcurate.flows.deflectionbench import deflectionbench

    flow = deflectionbench.with_options(task_runner=_runner(config))
    typer.echo(flow(config=str(config.resolve()), version=version))


@run_app.command("reflvqa")
def run_reflvqa(config: ConfigOpt = Path("configs/demo.yaml"), version: VersionOpt = None) -> None:
    """Curate RefLVQA (long-form visual QA with sentence-level citations)."""
    _prefect_defaults()
    from mmcurate.flows.reflvqa import reflvqa

    flow = reflvqa.with_options(task_runner=_runner(config))
    typer.echo(flow(config=str(config.resolve()), version=version))


@run_app.command("reflectv")
def run_reflectv(config: ConfigOpt = Path("configs/demo.yaml"), version: VersionOpt = None) -> None:
    """Curate ReflectV (reflective, visually grounded multi-turn trajectories, MIRROR)."""
    _prefect_defaults()
    from mmcurate.flows.reflectv import reflectv

    flow = reflectv.with_options(task_runner=_runner(config))
    typer.echo(flow(config=str(config.resolve()), version=version))


@app.command("evaluate")
def evaluate(
    release: Annotated[Path, typer.Argument(help="a DeflectionBench release folder")],
    model: Annotated[str, typer.Option("--model", help="a model name from --config, or a YAML file with one model spec")],
    config: ConfigOpt = Path("configs/demo.yaml"),
    scenario: Annotated[Optional[list[str]], typer.Option("--scenario", help="repeat; default: all four")] = None,
    negatives: Annotated[Optional[list[int]], typer.Option("--negatives", help="n for realistic (1-10); repeat")] = None,
    abstention: Annotated[str, typer.Option(help="soft, moderate or severe")] = "moderate",
    out: Annotated[Optional[Path], typer.Option(help="output folder (default under the workdir)")] = None,
) -> None:
    """Four-scenario evaluation (parametric, oracle, realistic, adversarial) of one model."""
    _prefect_defaults()
    from mmcurate.flows.evaluate import evaluate_release
    from mmcurate.evaluation.scenarios import SCENARIOS

    evaluate_release(release=str(release.resolve()), model=model, config=str(config.resolve()),
                     scenarios=scenario or list(SCENARIOS), n_negatives=negatives or [1, 2, 5, 10],
                     abstention=abstention, out=str(out.resolve()) if out else None)


@app.command("recurate")
def recurate(
    release: Annotated[Path, typer.Argument(help="the DeflectionBench release to re-curate")],
    add_model: Annotated[list[str], typer.Option("--add-model", help="model name or YAML spec file; repeat")],
    config: Annotated[Optional[Path], typer.Option("--config", help="default: the release's own config")] = None,
    version: VersionOpt = None,
) -> None:
    """Gate a release with new models only; publish the next minor version with its diff."""
    _prefect_defaults()
    from mmcurate.flows.recurate import recurate as recurate_flow

    typer.echo(recurate_flow(release=str(release.resolve()), add_model=add_model,
                             config=str(config.resolve()) if config else None, version=version))
