"""The plan of a flow run as Prefect artifacts: before any model is called, and beside what
the run spent once it is done."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE

import mmcurate.planning.builtin  # noqa: F401  registers each benchmark's planners
from mmcurate.benchmarks import Benchmark
from mmcurate.core.config import Settings
from mmcurate.core.errors import MmcurateError
from mmcurate.core.plural import counted
from mmcurate.planning.plan import Plan
from mmcurate.planning.recuration import Budget
from mmcurate.releases.reader import list_versions
from mmcurate.releases.recuration import Recuration


@task(name="plan", cache_policy=NO_CACHE)
def plan_run(settings: Settings, benchmark: Benchmark, samples: int) -> Plan | None:
    """The bill of this run for its ``samples``, at the retention of the benchmark's latest
    release under ``releases_root`` (the paper's funnel when there is none, or when that
    release cannot be read as rates); None for a benchmark without a planner."""
    planner = benchmark.planner()
    if planner is None:
        get_run_logger().info(f"plan: mmcurate has no cost model of {benchmark.name} curation")
        return None
    versions = list_versions(settings.releases_root, benchmark.name)
    retention = str(settings.releases_root / benchmark.name / versions[-1]) if versions else None
    try:
        plan = planner(settings, samples, retention)
    except MmcurateError as exc:
        if retention is None:
            raise
        get_run_logger().warning(f"plan: no rates from {retention} ({exc}); using the paper's funnel")
        plan = planner(settings, samples, None)
    create_table_artifact(
        key=f"{benchmark.name}-plan",
        table=plan.table(),
        description=f"{benchmark.name}: planned requests, tokens, GPU-hours and cost for "
        f"{counted(samples, 'sample', grouped=True)}; retention: {plan.rates_from}",
    )
    return plan


@task(name="plan-vs-spent", cache_policy=NO_CACHE)
def report_spent(plan: Plan | None, calls: list[dict]) -> list[dict]:
    """The plan beside the run's call-counter rows (requests, calls, cache hits, usage tokens)."""
    if plan is None:
        return []
    rows = plan.against(calls)
    create_table_artifact(
        key=f"{plan.benchmark}-plan-vs-spent",
        table=rows,
        description=f"{plan.benchmark}: planned vs spent per step and model",
    )
    return rows


@task(name="plan-recuration", cache_policy=NO_CACHE)
def plan_recuration(run: Recuration, budget: Budget) -> Plan:
    """The bill of a re-curation's added models (``planning.recuration``), recorded before any
    model call; refused (one line) when it is over ``budget``."""
    plan = run.benchmark.recuration_planner()(run)
    create_table_artifact(
        key=f"{plan.benchmark}-recuration-plan",
        table=plan.table(),
        description=f"{plan.benchmark} {run.parent.version} -> {run.version}: requests, tokens, "
        f"GPU-hours and cost of the added models ({', '.join(run.new_models)})",
    )
    budget.refuse_over(plan)
    return plan
