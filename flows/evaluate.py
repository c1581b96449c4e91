"""Evaluating one model on a release, as the release's paper reports it.

DeflectionBench, the four scenarios:
    parametric   no context          oracle       gold contexts only
    realistic    gold + n negatives  adversarial  negatives only
Every answer is judged (SimpleQA rubric); accuracy, deflection, hallucination and the
truthfulness score per scenario and per source; with several abstention levels the
strictness sweep, with ``modality_analysis`` the negative-modality table. The answers
are also CRAG-scored (first 75 tokens; perfect / acceptable / missing / incorrect). The
answering ``system`` is ``plain`` or ``verify-first`` (CRUISE's gate around the model);
a non-plain run's default folder carries the system's name, so it never overwrites the
plain run.

RefLVQA, a RAG run over the release's own knowledge base:
    retrieve     top-100 documents for the question, rerank, keep the top K (5)
    answer       the model cites the numbered documents per sentence
    grade        groundedness, completeness, relevance; retrieval quality of the KB
"""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from prefect import flow

from mmcurate.core.config import Settings, load_config
from mmcurate.core.errors import MmcurateError
from mmcurate.core.ids import new_run_id
from mmcurate.core.images import ImageStore
from mmcurate.evaluation.run_record import record_release
from mmcurate.evaluation.scenarios import FAILED, PLAIN, SCENARIOS, check_system
from mmcurate.models.accounting import failed_calls
from mmcurate.releases.reader import Release, open_release
from mmcurate.releases.reflvqa_tables import KNOWLEDGE_BASE
from mmcurate.releases.unembed import canonical_rows, canonical_samples
from mmcurate.tasks.evaluate import answer_reflvqa, answer_scenarios, score_crag, summarise, summarise_reflvqa

DEMO_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "demo.yaml"


@flow(name="evaluate", log_prints=True)
def evaluate_release(
    release: str,
    model: str,
    config: str = str(DEMO_CONFIG),
    scenarios: list[str] = list(SCENARIOS),
    n_negatives: list[int] = [1, 2, 5, 10],
    abstention: str | list[str] = "moderate",
    modality_analysis: bool = False,
    out: str | None = None,
    system: str = PLAIN,
) -> str:
    """Evaluate ``model`` on ``release``; the scenario and system options apply to DeflectionBench only."""
    settings = load_config(config)
    name = settings.add_model(model).name
    bench = open_release(release)
    check_system(system, bench.benchmark)
    run_id = new_run_id()
    folder = name if system == PLAIN else f"{name}-{system}"
    target = Path(out) if out else settings.workdir / "evaluations" / f"{bench.benchmark}-{bench.version}" / folder
    if bench.benchmark == "reflvqa":
        return _evaluate_reflvqa(bench, settings, name, run_id, target)

    levels = [abstention] if isinstance(abstention, str) else list(abstention)
    samples = canonical_samples(bench, ImageStore(settings.workdir / "images"))
    seed = int(bench.manifest.get("seed", 0))
    results, calls = answer_scenarios(samples, settings, name, scenarios, n_negatives, levels, seed, run_id,
                                      modality_analysis, system)
    failed = [error for grade, error in zip(results["grade"].to_pylist(), results["error"].to_pylist()) if grade == FAILED]
    if failed:  # a table over the answers that did arrive would read as the model's score
        raise MmcurateError(f"{failed_calls(name, len(failed), results.num_rows, failed[0])}; nothing was summarised; "
                            "rerun to resume (answers received are cached)")
    crag, crag_note, crag_calls = score_crag(results, samples, settings)
    calls += crag_calls
    table = summarise(results, target, f"{name} on {bench.benchmark} {bench.version} ({', '.join(levels)} abstention, "
                                       f"{system} system)", crag, crag_note)
    record_release(target, bench.benchmark, bench.version, bench.content_id)
    print(table)
    print(f"answers, metrics and plot -> {target}; model calls: {sum(r['calls'] for r in calls)}, "
          f"failed: {sum(r['failures'] for r in calls)}")
    return str(target)


def _evaluate_reflvqa(bench: Release, settings: Settings, model: str, run_id: str, target: Path) -> str:
    cfg = settings.evaluation.reflvqa
    store = ImageStore(settings.workdir / "images")
    qa = canonical_rows(bench, store, "qa")
    documents = pa.Table.from_pylist(canonical_rows(bench, store, "knowledge_base"), schema=KNOWLEDGE_BASE)
    run, components, notes, calls = answer_reflvqa(qa, documents, settings, model, run_id)
    evaluators = sorted({components[f"{m}_evaluator"] for m in ("groundedness", "completeness", "relevance")})
    stand_in = " (token-overlap stand-in, not an evaluator model)" if any(e.startswith("lexical") for e in evaluators) else ""
    setting = f"RAG top-{cfg.top_k}" if cfg.cutoff is None else f"RAG cutoff {cfg.cutoff}"
    title = (f"{model} on reflvqa {bench.version}: {setting} of {cfg.candidates} ({components['retriever']}, "
             f"reranked by {components['reranker']}); graded by {', '.join(evaluators)}{stand_in}")
    table = summarise_reflvqa(run, target, title, setting, notes)
    record_release(target, bench.benchmark, bench.version, bench.content_id)
    print(table)
    print(f"answers, grades, metrics and Hit@K plot -> {target}; model calls: {sum(r['calls'] for r in calls)}, "
          f"failed: {sum(r['failures'] for r in calls)}")
    return str(target)
