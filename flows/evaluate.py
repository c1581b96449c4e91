"""The four-scenario evaluation of a DeflectionBench release with one model.

    parametric   no context          oracle       gold contexts only
    realistic    gold + n negatives  adversarial  negatives only
Every answer is judged (SimpleQA rubric); accuracy, deflection, hallucination and the
truthfulness score are reported per scenario and per source.
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow

from mmcurate.core.config import load_config
from mmcurate.core.errors import MmcurateError
from mmcurate.core.ids import new_run_id
from mmcurate.core.images import ImageStore
from mmcurate.evaluation.scenarios import FAILED, SCENARIOS
from mmcurate.releases.reader import open_release
from mmcurate.releases.unembed import canonical_samples
from mmcurate.tasks.evaluate import answer_scenarios, summarise

DEMO_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "demo.yaml"


@flow(name="evaluate", log_prints=True)
def evaluate_release(
    release: str,
    model: str,
    config: str = str(DEMO_CONFIG),
    scenarios: list[str] = list(SCENARIOS),
    n_negatives: list[int] = [1, 2, 5, 10],
    abstention: str = "moderate",
    out: str | None = None,
) -> str:
    settings = load_config(config)
    spec = settings.add_model(model)
    bench = open_release(release)
    samples = canonical_samples(bench, ImageStore(settings.workdir / "images"))
    seed = int(bench.manifest.get("seed", 0))
    run_id = new_run_id()

    results, calls = answer_scenarios(samples, settings, spec.name, scenarios, n_negatives, abstention, seed, run_id)
    failed = [error for grade, error in zip(results["grade"].to_pylist(), results["error"].to_pylist()) if grade == FAILED]
    if failed:  # a table over the answers that did arrive would read as the model's score
        raise MmcurateError(f"{len(failed)} of {results.num_rows} calls to {spec.name} failed (first: {failed[0]}); "
                            "nothing was summarised; rerun to resume (answers received are cached)")
    target = Path(out) if out else settings.workdir / "evaluations" / f"{bench.benchmark}-{bench.version}" / spec.name
    table = summarise(results, target, f"{spec.name} on {bench.benchmark} {bench.version} ({abstention} abstention)")
    print(table)
    print(f"answers, metrics and plot -> {target}; model calls: {sum(r['calls'] for r in calls)}")
    return str(target)
