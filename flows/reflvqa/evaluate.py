"""RefLVQA's evaluation (seed 004, section 4 and Table 5): a grid of RAG settings over the
release's own knowledge base.

    plan         the calls of the grid, before the first one (a Prefect artifact)
    queries      the model writes N search queries per question (N in ``queries``)
    retrieve     per query top-100 documents of the setting's modalities, reranked, top K (5)
    answer       per setting (TextRAG, ImageRAG, MultiRAG, Two-step MultiRAG) the model cites
                 the N x K documents per sentence
    grade        groundedness, completeness, relevance; retrieval quality of the KB
    write        the run's cells (setting x N) added to the folder's (``evaluation.runs``)

The steps of the evaluation flow (``flows/evaluate.py``) for RefLVQA releases.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from mmcurate.benchmarks import register_part
from mmcurate.benchmarks.reflvqa import RefLVQAEvalConfig
from mmcurate.core.config import Settings
from mmcurate.core.ids import new_run_id
from mmcurate.core.specs import is_lexical
from mmcurate.evaluation.decoding import REFLVQA, decoded_spec, decoding_note, decoding_record
from mmcurate.evaluation.failures import check_failures
from mmcurate.evaluation.reflvqa.grid import CELL, FAILED, SEARCHED_CELL, RefLVQARun, settings_by_searched, tally
from mmcurate.evaluation.reflvqa.report import ANSWERS_FILE, GRADES_FILE, RETRIEVAL_FILE
from mmcurate.evaluation.reflvqa.settings import PAPER_NAMES, SETTINGS
from mmcurate.evaluation.reflvqa.subset import choose_pairs, population
from mmcurate.evaluation.runs import updating
from mmcurate.releases.reader import Release
from mmcurate.releases.reflvqa.tables import KNOWLEDGE_BASE
from mmcurate.releases.unembed import canonical_rows
from mmcurate.tasks.evaluate import answer_reflvqa, plan_evaluation, summarise_reflvqa
from mmcurate.tasks.plan import report_spent


@register_part("reflvqa", "evaluate")
def evaluate_reflvqa(
    bench: Release,
    conf: Settings,
    name: str,
    target: Path,
    allow_incomplete: bool,
    settings: list[str],
    queries: list[int],
    subset: str | None = None,
) -> None:
    """``settings`` (text, image, multi, two-step) x ``queries`` (N) on the ``subset`` of QA pairs
    (default: the config's, the human-verified pairs), checked by ``run_options``; the flow has
    refused a subset it cannot read (``evaluation.reflvqa.subset.refuse_unrunnable``) before this runs."""
    cfg = RefLVQAEvalConfig.of(conf)
    conf.models[name] = decoded_spec(conf.model(name), cfg.decoding)  # seed 004, C.2
    decoding = {**decoding_record(conf.model(name), cfg.decoding), "max_new_tokens": cfg.answer_max_tokens}
    store = conf.image_store()
    subset = subset or cfg.subset
    qa, subset_note = choose_pairs(canonical_rows(bench, store, "qa"), cfg.verified_labels, subset)
    documents = pa.Table.from_pylist(canonical_rows(bench, store, "knowledge_base"), schema=KNOWLEDGE_BASE)
    plan = plan_evaluation(conf, name, qa, documents, settings, queries)
    run, components, notes, calls = answer_reflvqa(qa, documents, conf, name, new_run_id(), settings, queries)
    report_spent(plan, calls)
    failed = [row["error"] for row in run.answers.select(["status", "error"]).to_pylist() if row["status"] == FAILED]
    incomplete = check_failures(
        name, len(failed), run.answers.num_rows, failed[0] if failed else None, allow_incomplete
    )
    notes = [incomplete, subset_note, *notes] if incomplete else [subset_note, *notes]
    notes.append(
        f"{decoding_note(name, decoding, REFLVQA)} Answers: at most {cfg.answer_max_tokens} new tokens "
        "(evaluation.reflvqa.answer_max_tokens; seed 004, C.2: 2,048)."
    )
    evaluators = sorted({components[f"{m}_evaluator"] for m in ("groundedness", "completeness", "relevance")})
    stand_in = " (token-overlap stand-in, not an evaluator model)" if any(map(is_lexical, evaluators)) else ""
    cut = f"top-{cfg.top_k}" if cfg.cutoff is None else f"cutoff {cfg.cutoff}"
    with updating(
        target,
        bench.benchmark,
        bench.version,
        bench.content_id,
        name,
        extra={"decoding": decoding},
        population=population(cfg.verified_labels, subset),
    ) as folder:
        answers, grades = folder.merge(ANSWERS_FILE, run.answers, CELL), folder.merge(GRADES_FILE, run.grades, CELL)
        run = RefLVQARun(
            answers,
            grades,
            folder.merge(RETRIEVAL_FILE, run.retrieval, SEARCHED_CELL, told=False),
            tally(qa, answers, grades),
            run.score_average,
        )
        for line in folder.messages():
            print(line)
        settings_run = [s for s in SETTINGS if s in set(answers["setting"].to_pylist())]
        title = (
            f"{name} on reflvqa {bench.version}: {', '.join(PAPER_NAMES[s] for s in settings_run)} with "
            f"N = {', '.join(map(str, sorted(set(answers['n_queries'].to_pylist()))))} search queries, {cut} "
            f"per query of {cfg.candidates} ({components['retriever']}, reranked by {components['reranker']}; "
            f"images: {components['image_retriever']}); graded by {', '.join(evaluators)}{stand_in}"
        )
        summarise_reflvqa(
            run,
            folder.staging,
            title,
            settings_by_searched(settings_run, cfg.two_step_documents),
            [*notes, *filter(None, [folder.note()])],
        )
    print(
        f"answers, grades, metrics and Hit@K plot -> {target}; model calls: {sum(r['calls'] for r in calls)}, "
        f"failed: {sum(r['failures'] for r in calls)}"
    )
