"""Evaluation tasks: answer every scenario with one model, judge, summarise."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from mmcurate.core.config import Settings
from mmcurate.core.images import ImageStore
from mmcurate.core.tables import write_table
from mmcurate.gating.metrics import compute_metrics, markdown_table, plot_vs_negatives
from mmcurate.gating.scenarios import evaluate

from .models import open_models


@task(name="answer-scenarios", cache_policy=NO_CACHE)
def answer_scenarios(samples: pa.Table, settings: Settings, model: str, scenarios: list[str],
                     n_negatives: list[int], abstention: str, seed: int, run_id: str) -> tuple[pa.Table, list[dict]]:
    with open_models(settings, ImageStore(settings.workdir / "images")) as models:
        results = evaluate(samples, models.pool, models.judge, model, scenarios, n_negatives, abstention, seed, run_id)
        return results, models.counter.rows()


@task(name="summarise-evaluation", cache_policy=NO_CACHE)
def summarise(results: pa.Table, out: Path, title: str) -> str:
    """Write answers, metrics per scenario and per source, the Table-4 markdown and the plot."""
    out.mkdir(parents=True, exist_ok=True)
    write_table(results, out / "answers.parquet")
    by_scenario = compute_metrics(results, by=("scenario",))
    by_source = compute_metrics(results, by=("scenario", "source"))
    write_table(by_scenario, out / "metrics_by_scenario.parquet")
    write_table(by_source, out / "metrics_by_source.parquet")
    text = (f"# {title}\n\n## Per scenario\n\n{markdown_table(by_scenario)}\n\n"
            f"## Per scenario and source\n\n{markdown_table(by_source)}\n")
    (out / "table.md").write_text(text)
    plot_vs_negatives(results, out / "metrics_vs_negatives.png")
    create_markdown_artifact(key="evaluation", markdown=text, description=title)
    return text
