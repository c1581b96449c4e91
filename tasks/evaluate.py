"""Evaluation tasks: answer with one model and grade; write the results and the artifact.
What a run with failed calls may write is decided once, by ``evaluation.failures``, in the
evaluation flows."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from mmcurate.benchmarks.deflectionbench import VerifyFirstConfig
from mmcurate.benchmarks.reflvqa import RefLVQAEvalConfig
from mmcurate.core.config import Settings
from mmcurate.core.plural import counted
from mmcurate.core.specs import is_lexical
from mmcurate.core.stages import StageContext
from mmcurate.evaluation.crag import crag_judge, crag_note, crag_score, token_counter
from mmcurate.evaluation.cragmm.cruise import (
    SYSTEM_NAME as CRUISE,
)
from mmcurate.evaluation.cragmm.cruise import (
    answer_variants,
    build_retriever,
    cruise_system,
    default_clock,
)
from mmcurate.evaluation.cragmm.report import write_cragmm_evaluation
from mmcurate.evaluation.deflectionbench.report import write_evaluation
from mmcurate.evaluation.deflectionbench.scenarios import DEFAULT_NEGATIVES, evaluate
from mmcurate.evaluation.pope.probes import pope_answers, write_pope_evaluation
from mmcurate.evaluation.reflvqa.graders import METRICS, make_grader
from mmcurate.evaluation.reflvqa.grid import RefLVQARun, empty_note, evaluate_reflvqa, kept_note, reading_notes
from mmcurate.evaluation.reflvqa.report import write_reflvqa_evaluation
from mmcurate.evaluation.reflvqa.settings import run_options
from mmcurate.evaluation.verify_first import VerifyFirst
from mmcurate.gating.prompts import BUILT_IN, PromptSet
from mmcurate.judging.session import open_models
from mmcurate.planning.plan import Plan
from mmcurate.planning.reflvqa.evaluation import plan_reflvqa_evaluation
from mmcurate.retrieval.encoders import cross_modal_encoder, text_encoder
from mmcurate.retrieval.rag import RagCorpus
from mmcurate.retrieval.rerank import reranker

from .models import prefect_secret


@task(name="answer-scenarios", cache_policy=NO_CACHE)
def answer_scenarios(
    samples: pa.Table,
    settings: Settings,
    model: str,
    scenarios: Sequence[str],
    n_negatives: Sequence[int],
    abstention: Sequence[str],
    seed: int,
    run_id: str,
    modality_analysis: bool = False,
    system: str = "plain",
    templates: PromptSet = BUILT_IN,
) -> tuple[pa.Table, list[dict]]:
    gate = VerifyFirstConfig.of(settings)
    with open_models(settings, settings.image_store(), prefect_secret) as models:
        results = evaluate(
            samples,
            models.pool,
            models.judge,
            model,
            scenarios,
            n_negatives,
            abstention,
            seed,
            run_id,
            modality_analysis,
            system,
            templates,
            VerifyFirst(model, router=gate.router, verifier=gate.verifier),
        )
        calls = models.counter.rows()
    return results, calls


@task(name="crag-score", cache_policy=NO_CACHE)
def score_crag(results: pa.Table, samples: pa.Table, settings: Settings) -> tuple[pa.Table, str, list[dict]]:
    """The answers CRAG-scored (first 75 tokens, four grades) by the configured judge through the
    model pool (cached); the note naming the judge and the token counter; the call counts."""
    with open_models(settings, settings.image_store(), prefect_secret) as models:
        judge, counter = crag_judge(settings, models.pool), token_counter(settings)
        scored = crag_score(results, samples, judge, counter)
        calls = models.counter.rows()
    return scored, crag_note(judge, counter), calls


@task(name="summarise-evaluation", cache_policy=NO_CACHE)
def summarise(
    results: pa.Table,
    out: Path,
    title: str,
    crag: pa.Table | None = None,
    crag_note: str = "",
    notes: list[str] | None = None,
    table_n: int = DEFAULT_NEGATIVES,
) -> str:
    """Write answers, metrics per scenario and per source, the Table-4 markdown (realistic and
    adversarial at ``table_n`` negatives), the sweep over n, the CRAG scoring and the plot;
    ``notes`` go under the title."""
    text = write_evaluation(results, out, title, crag, crag_note, notes or [], table_n)
    create_markdown_artifact(key="evaluation", markdown=text, description=title)
    return text


@task(name="plan-evaluation", cache_policy=NO_CACHE)
def plan_evaluation(
    settings: Settings, model: str, qa: list[dict], documents: pa.Table, grid: list[str], queries: list[int]
) -> Plan:
    """The RefLVQA grid's plan, recorded before its first model call (a table artifact) and printed."""
    plan = plan_reflvqa_evaluation(settings, model, qa, documents, grid, queries)
    create_table_artifact(
        key=f"{plan.benchmark}-plan",
        table=plan.table(),
        description=f"{plan.benchmark}: planned requests, tokens, GPU-hours and cost for "
        f"{counted(plan.samples, 'question', grouped=True)}",
    )
    print(plan.render())
    return plan


@task(name="answer-reflvqa", cache_policy=NO_CACHE)
def answer_reflvqa(
    qa: list[dict],
    documents: pa.Table,
    settings: Settings,
    model: str,
    run_id: str,
    grid: list[str] | None = None,
    queries: list[int] | None = None,
) -> tuple[RefLVQARun, dict[str, str], list[str], list[dict]]:
    """The grid (``grid`` settings x ``queries`` N; default every setting, N = 1): queries,
    retrieval, answers with citations, grades. Returns the run, the components (retriever,
    reranker, evaluators), notes on the readings and on what could not be done, and the call counts."""
    cfg = RefLVQAEvalConfig.of(settings)
    options = run_options({"settings": grid, "queries": queries})
    store = settings.image_store()
    corpus = RagCorpus(
        documents,
        settings.workdir / "indexes",
        text_encoder(cfg.text_encoder),
        reranker(cfg.reranker),
        cross_modal_encoder(cfg.cross_modal_encoder) if cfg.cross_modal_encoder else None,
        store.read,
        cfg.candidates,
        cfg.query_embedding,
        fusion=cfg.fusion,
    )
    by_id = {row["doc_id"]: row for row in documents.to_pylist()}
    with open_models(settings, store, prefect_secret) as models:
        graders = {metric: make_grader(getattr(cfg.evaluators, metric), metric, models.pool) for metric in METRICS}
        run = evaluate_reflvqa(
            qa, by_id, corpus, models.pool, model, graders, cfg, options["settings"], options["queries"], run_id
        )
        calls = models.counter.rows()
    components = {**corpus.components, **{f"{m}_evaluator": g.name for m, g in graders.items()}}
    notes = [*reading_notes(cfg, options["settings"]), *corpus.notes]
    kept = kept_note(run.answers, cfg.cutoff, cfg.candidates)
    notes += [kept] if kept else []
    lexical = sorted({g.name for g in graders.values() if is_lexical(g.name)})
    if lexical:
        notes.append(
            f"{', '.join(m for m, g in graders.items() if is_lexical(g.name))} graded by the "
            f"lexical stand-in ({', '.join(lexical)}): token overlap, not an evaluator model."
        )
    empty = empty_note(run)
    notes += [empty] if empty else []
    return run, components, notes, calls


@task(name="summarise-reflvqa", cache_policy=NO_CACHE)
def summarise_reflvqa(run: RefLVQARun, out: Path, title: str, searched: dict[str, list[str]], notes: list[str]) -> str:
    """Write answers, grades, retrieval scores, the Table-5-shaped markdown and the Hit@K plot."""
    text = write_reflvqa_evaluation(run, out, title, searched, notes)
    create_markdown_artifact(key="evaluation-reflvqa", markdown=text, description=title)
    return text


@task(name="answer-cragmm", cache_policy=NO_CACHE)
def answer_cragmm(
    turns: list[dict], settings: Settings, model: str, system: str, task: str | None, ablations: list[str] | None = None
) -> tuple[pa.Table, dict[str, str], list[dict]]:
    """Every turn answered by ``system`` (plain or cruise, and each of Table 1's ``ablations``),
    conversations in turn order; the components used and the call counts."""
    store = settings.image_store()
    retriever = build_retriever(settings, task) if system == CRUISE else None
    with open_models(settings, store, prefect_secret) as models:
        answers = answer_variants(
            turns,
            models.pool,
            cruise_system(settings, model),
            system,
            ablations or [],
            retriever,
            store.read,
            default_clock,
        )
        calls = models.counter.rows()
    return answers, (retriever.components if retriever else {}), calls


@task(name="summarise-cragmm", cache_policy=NO_CACHE)
def summarise_cragmm(ruled: pa.Table, out: Path, title: str, notes: list[str], reading: str) -> str:
    """Write answers and the CRAG tables (per set, domain, query category; multi-turn score)."""
    text = write_cragmm_evaluation(ruled, out, title, notes, reading)
    create_markdown_artifact(key="evaluation-cragmm", markdown=text, description=title)
    return text


@task(name="answer-pope", cache_policy=NO_CACHE)
def answer_pope(
    probes: list[dict], settings: Settings, model: str, system: str, run_id: str
) -> tuple[list[dict], list[str], list[dict]]:
    """Every POPE probe answered plain or through Kestrel; the rows, the notes, the call counts."""
    store = settings.image_store()
    with open_models(settings, store, prefect_secret) as models:
        rows, notes = pope_answers(probes, StageContext(settings, run_id, store, models), model, system)
        calls = models.counter.rows()
    return rows, notes, calls


@task(name="summarise-pope", cache_policy=NO_CACHE)
def summarise_pope(rows: list[dict], out: Path, title: str, notes: list[str]) -> str:
    """Write answers (with Kestrel's traces), POPE's metrics per split and the markdown table."""
    text = write_pope_evaluation(rows, out, title, notes)
    create_markdown_artifact(key="evaluation-pope", markdown=text, description=title)
    return text
