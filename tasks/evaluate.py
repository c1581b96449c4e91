"""Evaluation tasks: answer every scenario with one model and judge; write the results."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from mmcurate.core.config import Settings
from mmcurate.core.images import ImageStore
from mmcurate.evaluation.report import write_evaluation
from mmcurate.evaluation.scenarios import evaluate
from mmcurate.gating.models import open_models

from .models import prefect_secret


@task(name="answer-scenarios", cache_policy=NO_CACHE)
def answer_scenarios(samples: pa.Table, settings: Settings, model: str, scenarios: list[str],
                     n_negatives: list[int], abstention: str, seed: int, run_id: str) -> tuple[pa.Table, list[dict]]:
    with open_models(settings, ImageStore(settings.workdir / "images"), prefect_secret) as models:
        results = evaluate(samples, models.pool, models.judge, model, scenarios, n_negatives, abstention, seed, run_id)
        return results, models.counter.rows()


@task(name="summarise-evaluation", cache_policy=NO_CACHE)
def summarise(results: pa.Table, out: Path, title: str) -> str:
    """Write answers, metrics per scenario and per source, the Table-4 markdown and the plot."""
    text = write_evaluation(results, out, title)
    create_markdown_artifact(key="evaluation", markdown=text, description=title)
    return text
