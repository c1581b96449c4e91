"""``mmcurate run BENCHMARK --config FILE``, ``evaluate`` and ``recurate``: real Prefect flow runs.

Arguments and the config are checked before Prefect starts, so a mistake is one line at
once; the flow then runs through ``session.run_flow`` (its own temporary Prefect API,
prompt interrupts, exit codes). The benchmarks, their flows and their evaluation options
come from the registry (``mmcurate.benchmarks``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from mmcurate.benchmarks import Benchmark, curated
from mmcurate.releases.reader import local_folder

from .app import app
from .session import run_flow

run_app = typer.Typer(help="Run a curation flow (a real Prefect flow run).", no_args_is_help=True)
app.add_typer(run_app, name="run")

ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="pipeline config (YAML); default: the bundled demo.yaml (reads a checkout's fixtures) with "
        "the workdir ./.mmcurate and the releases root ./releases_out of the current directory",
    ),
]
VersionOpt = Annotated[str | None, typer.Option("--version", help="release version (default: the config's)")]
IncompleteOpt = Annotated[
    bool,
    typer.Option("--allow-incomplete", help="publish even if failed model calls held samples out (the card says so)"),
]
MaxCallsOpt = Annotated[
    int | None,
    typer.Option("--max-calls", help="refuse, before any call, a re-curation planned to make more model calls"),
]
MaxCostOpt = Annotated[
    float | None, typer.Option("--max-cost", help="refuse, before any call, a re-curation planned to cost more (USD)")
]
# an evaluation option as the flows name it -> as the user types it
FLAGS = {
    "scenarios": "--scenario",
    "n_negatives": "--negatives",
    "abstention": "--abstention",
    "strictness_sweep": "--strictness-sweep",
    "modality_analysis": "--modality-analysis",
    "system": "--system",
    "task": "--task",
    "limit": "--limit",
    "settings": "--setting",
    "queries": "--queries",
    "subset": "--subset",
    "oracle_grounding": "--oracle-grounding",
    "ablations": "--ablation",
}
SettingOpt = Annotated[
    list[str] | None,
    typer.Option("--setting", help="RefLVQA: text, image, multi or two-step; repeat (default: all four)"),
]
QueriesOpt = Annotated[
    list[int] | None,
    typer.Option("--queries", help="RefLVQA: N search queries the model writes (1-10); repeat (default: 1)"),
]
SubsetOpt = Annotated[
    str | None,
    typer.Option(
        "--subset",
        help="RefLVQA: verified (the pairs with imported human-verified sentences; the default when "
        "evaluation.reflvqa.verified_labels is set) or all",
    ),
]


def _prefect_defaults() -> None:
    """No telemetry, no hub, no library progress bars; give the API server time to start on a
    busy machine."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


# what a command without --config writes where: the current directory's, never the demo file's folder
DEFAULT_PLACES = {"MMCURATE_WORKDIR": ".mmcurate", "MMCURATE_RELEASES_ROOT": "releases_out"}


def config_or_demo(config: Path | None) -> Path:
    """``--config``, or the bundled demo config (found in an install as in a checkout) with its
    workdir and releases root in the current directory: the demo file's own (``../.mmcurate``)
    are a checkout's, or site-packages' in an install, and a command run elsewhere must not
    write there. They are set as ``MMCURATE_WORKDIR`` / ``MMCURATE_RELEASES_ROOT`` (unless the
    user set them), so the flow this process runs loads the same settings; the first line on
    stderr says which folders are used."""
    from mmcurate.core.config import bundled_config

    if config is not None:
        return config
    demo = bundled_config("demo.yaml")
    said = []
    for variable, folder in DEFAULT_PLACES.items():
        given = os.environ.get(variable)
        if given is None:
            os.environ[variable] = str(Path.cwd() / folder)
        said.append(
            f"{variable.removeprefix('MMCURATE_').lower()} {os.environ[variable]}"
            + (f" ({variable})" if given is not None else "")
        )
    typer.echo(f"mmcurate: no --config: the bundled {demo} with {' and '.join(said)}", err=True)
    return demo


def _curate(benchmark: Benchmark, config: Path | None, version: str | None, allow_incomplete: bool) -> None:
    """Run the benchmark's curation flow on the configured task runner, after every check that
    can be made before it starts (``releases.curation.begin_curation``)."""
    import mmcurate.flows.builtin  # noqa: F401  registers the curation flows
    from mmcurate.releases.curation import begin_curation
    from mmcurate.tasks.runners import make_task_runner

    _prefect_defaults()
    config = config_or_demo(config)
    run = begin_curation(config, benchmark.name, version)
    flow = benchmark.flow("curate").with_options(task_runner=make_task_runner(run.settings.task_runner))
    typer.echo(run_flow(lambda: flow(config=str(config.resolve()), version=version, allow_incomplete=allow_incomplete)))


def _curation_command(benchmark: Benchmark) -> None:
    def command(config: ConfigOpt = None, version: VersionOpt = None, allow_incomplete: IncompleteOpt = False) -> None:
        _curate(benchmark, config, version, allow_incomplete)

    command.__doc__ = f"Curate {benchmark.title}."
    run_app.command(benchmark.name)(command)


for _benchmark in curated():
    _curation_command(_benchmark)


@app.command("evaluate")
def evaluate(
    where: Annotated[str, typer.Argument(metavar="RELEASE", help="a release folder (a path or URL)")],
    model: Annotated[
        str, typer.Option("--model", help="a model name from --config, or a YAML file with one model spec")
    ],
    config: ConfigOpt = None,
    scenario: Annotated[
        list[str] | None, typer.Option("--scenario", help="DeflectionBench: repeat; default: all four")
    ] = None,
    negatives: Annotated[
        list[int] | None,
        typer.Option(
            "--negatives", help="DeflectionBench: n for realistic and adversarial (1-20: MAX_NEGATIVES); repeat"
        ),
    ] = None,
    abstention: Annotated[
        list[str] | None,
        typer.Option(
            "--abstention", help="DeflectionBench: none, soft, moderate or severe; repeat for a strictness table"
        ),
    ] = None,
    strictness_sweep: Annotated[
        bool,
        typer.Option(
            "--strictness-sweep", help="DeflectionBench: all four abstention levels and the table across them"
        ),
    ] = False,
    modality_analysis: Annotated[
        bool,
        typer.Option(
            "--modality-analysis", help="DeflectionBench: also realistic with text / image / multimodal negatives"
        ),
    ] = False,
    system: Annotated[
        str | None,
        typer.Option(
            "--system",
            help="answering system: plain; verify-first (CRUISE's gate; DeflectionBench); cruise (CRAG-MM); "
            "kestrel (grounded self-refinement; POPE)",
        ),
    ] = None,
    ablation: Annotated[
        list[str] | None,
        typer.Option(
            "--ablation",
            help="CRAG-MM with --system cruise: Table 1's rows beside CRUISE: no-cov, "
            "no-cov-no-consistency or rag-agent; repeat",
        ),
    ] = None,
    task: Annotated[
        str | None, typer.Option("--task", help="CRAG-MM: the competition's task 1, 2 or 3 (default: every turn)")
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="CRAG-MM: the first N conversations of each set")] = None,
    setting: SettingOpt = None,
    queries: QueriesOpt = None,
    subset: SubsetOpt = None,
    oracle_grounding: Annotated[
        bool,
        typer.Option(
            "--oracle-grounding",
            help="POPE with Kestrel: allow a grounding agent that reads the annotations the "
            "labels come from (the table says: oracle grounding, an upper bound)",
        ),
    ] = False,
    out: Annotated[Path | None, typer.Option(help="output folder (default under the workdir)")] = None,
    allow_incomplete: Annotated[
        bool,
        typer.Option(
            "--allow-incomplete", help="write the tables even if some answer calls failed for good (they say so)"
        ),
    ] = False,
) -> None:
    """Evaluate one model on a release, as its benchmark's paper does (the options a benchmark takes
    are its own; see its page in docs/benchmarks/)."""
    import mmcurate.evaluation.builtin  # noqa: F401  registers the option checks and refusals
    from mmcurate.benchmarks import get
    from mmcurate.core.config import load_config
    from mmcurate.releases.reader import open_release, refuse_inside_release

    # every input is checked before Prefect starts: a bad one is one line, exit 2
    release = local_folder(where)
    benchmark = get(open_release(release).benchmark)
    evaluation = benchmark.required_evaluation()
    if out is not None:
        refuse_inside_release(out, "--out")
    config = config_or_demo(config)
    settings = load_config(config)
    name = settings.add_model(model).name
    given: dict[str, Any] = {
        "scenarios": scenario,
        "n_negatives": negatives,
        "abstention": abstention,
        "strictness_sweep": strictness_sweep,
        "modality_analysis": modality_analysis,
        "system": system,
        "task": task,
        "limit": limit,
        "settings": setting,
        "queries": queries,
        "subset": subset,
        "oracle_grounding": oracle_grounding,
        "ablations": ablation,
    }
    # what the user set: a 0 (``--limit 0``) is set, and checked, not taken for "not given"
    set_by_user = {k: v for k, v in given.items() if v is not None and v is not False}
    arguments = evaluation.arguments(benchmark.name, set_by_user, FLAGS)
    evaluation.refuse_unrunnable(benchmark.name, settings, name, arguments)

    _prefect_defaults()
    from mmcurate.flows.evaluate import evaluate_release  # Prefect loads once every input is checked

    folder = Path(
        run_flow(
            lambda: evaluate_release(
                release=str(release.resolve()),
                model=model,
                config=str(config.resolve()),
                out=str(out.resolve()) if out else None,
                allow_incomplete=allow_incomplete,
                options=arguments,
            )
        )
    )
    typer.echo((folder / "table.md").read_text(), nl=False)  # the table alone on stdout: `> table.md` works
    typer.echo(f"evaluation: {folder}", err=True)


@app.command("recurate")
def recurate(
    where: Annotated[str, typer.Argument(metavar="RELEASE", help="the release to re-curate (a path or URL)")],
    add_model: Annotated[
        list[str],
        typer.Option(
            "--add-model",
            help="SPEC or ROLE=SPEC: a model name of the config, a YAML spec file, or CATALOG#NAME (a catalog's model); repeat",
        ),
    ],
    config: Annotated[Path | None, typer.Option("--config", help="default: the release's own config")] = None,
    version: VersionOpt = None,
    allow_incomplete: IncompleteOpt = False,
    max_calls: MaxCallsOpt = None,
    max_cost: MaxCostOpt = None,
) -> None:
    """Re-curate a release with new models only (the original models' answers come from its
    ledger); publish the next minor version beside it with its diff and CHANGELOG.md."""
    from mmcurate.flows.recurate import recurate_release
    from mmcurate.planning.recuration import Budget
    from mmcurate.releases.recuration import begin_recuration

    _prefect_defaults()
    Budget(max_calls, max_cost)
    release = local_folder(where)
    begin_recuration(release, config, add_model, version)  # every check, before Prefect starts
    typer.echo(
        run_flow(
            lambda: recurate_release(
                release=str(release.resolve()),
                add_model=add_model,
                config=str(config.resolve()) if config else None,
                version=version,
                allow_incomplete=allow_incomplete,
                max_calls=max_calls,
                max_cost=max_cost,
            )
        )
    )
