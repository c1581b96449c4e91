"""RefLVQA's evaluation (seed 004, section 4 and Table 5): a grid of RAG settings over the
release's own knowledge base.

    plan         the calls of the grid, before the first one (a Prefect artifact)
    queries      the model writes N search queries per question (N in ``queries``)
    retrieve     per query top-100 documents of the setting's modalities, reranked, top K (5)
    answer       per setting (TextRAG, ImageRAG, MultiRAG, Two-step MultiRAG) the model cites
                 the N x K documents per sentence
    grade        groundedness, completeness, relevance; retrieval quality of the KB
    write        the run's cells (setting x N) added to the folder's (``evaluation.runs``)
"""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from prefect import flow

from mmcurate.core.config import load_config
from mmcurate.core.ids import new_run_id
from mmcurate.core.images import ImageStore
from mmcurate.core.specs import is_lexical
from mmcurate.evaluation.failures import check_failures
from mmcurate.evaluation.reflvqa import CELL, FAILED, SEARCHED_CELL, RefLVQARun, settings_by_searched, tally
from mmcurate.evaluation.reflvqa_report import ANSWERS_FILE, GRADES_FILE, RETRIEVAL_FILE
from mmcurate.evaluation.reflvqa_settings import PAPER_NAMES, SETTINGS, run_options
from mmcurate.evaluation.runs import evaluation_folder, updating
from mmcurate.releases.reader import open_release
from mmcurate.releases.reflvqa_tables import KNOWLEDGE_BASE
from mmcurate.releases.unembed import canonical_rows
from mmcurate.tasks.evaluate import answer_reflvqa, plan_evaluation, summarise_reflvqa
from mmcurate.tasks.plan import report_spent

DEMO_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "demo.yaml"


@flow(name="evaluate-reflvqa", log_prints=True)
def evaluate_reflvqa(release: str, model: str, config: str = str(DEMO_CONFIG), out: str | None = None,
                     allow_incomplete: bool = False, settings: list[str] | None = None,
                     queries: list[int] | None = None) -> str:
    """``settings`` (text, image, multi, two-step) x ``queries`` (N); default: every setting, N = 1."""
    grid = run_options({"settings": settings, "queries": queries})
    conf = load_config(config)
    name = conf.add_model(model).name
    bench = open_release(release)
    target = evaluation_folder(conf, bench.benchmark, bench.version, name, out)
    cfg = conf.evaluation.reflvqa
    store = ImageStore(conf.workdir / "images")
    qa = canonical_rows(bench, store, "qa")
    documents = pa.Table.from_pylist(canonical_rows(bench, store, "knowledge_base"), schema=KNOWLEDGE_BASE)
    plan = plan_evaluation(conf, name, qa, documents, grid["settings"], grid["queries"])
    run, components, notes, calls = answer_reflvqa(qa, documents, conf, name, new_run_id(), grid["settings"],
                                                   grid["queries"])
    report_spent(plan, calls)
    failed = [row["error"] for row in run.answers.select(["status", "error"]).to_pylist() if row["status"] == FAILED]
    incomplete = check_failures(name, len(failed), run.answers.num_rows, failed[0] if failed else None,
                                allow_incomplete)
    notes = [incomplete, *notes] if incomplete else notes
    evaluators = sorted({components[f"{m}_evaluator"] for m in ("groundedness", "completeness", "relevance")})
    stand_in = " (token-overlap stand-in, not an evaluator model)" if any(map(is_lexical, evaluators)) else ""
    cut = f"top-{cfg.top_k}" if cfg.cutoff is None else f"cutoff {cfg.cutoff}"
    with updating(target, bench.benchmark, bench.version, bench.content_id, name) as folder:
        answers, grades = folder.merge(ANSWERS_FILE, run.answers, CELL), folder.merge(GRADES_FILE, run.grades, CELL)
        run = RefLVQARun(answers, grades, folder.merge(RETRIEVAL_FILE, run.retrieval, SEARCHED_CELL, told=False),
                         tally(qa, answers, grades))
        for line in folder.messages():
            print(line)
        settings_run = [s for s in SETTINGS if s in set(answers["setting"].to_pylist())]
        title = (f"{name} on reflvqa {bench.version}: {', '.join(PAPER_NAMES[s] for s in settings_run)} with "
                 f"N = {', '.join(map(str, sorted(set(answers['n_queries'].to_pylist()))))} search queries, {cut} "
                 f"per query of {cfg.candidates} ({components['retriever']}, reranked by {components['reranker']}; "
                 f"images: {components['image_retriever']}); graded by {', '.join(evaluators)}{stand_in}")
        summarise_reflvqa(run, folder.staging, title, settings_by_searched(settings_run, cfg.two_step_documents),
                          [*notes, *filter(None, [folder.note()])])
    print(f"answers, grades, metrics and Hit@K plot -> {target}; model calls: {sum(r['calls'] for r in calls)}, "
          f"failed: {sum(r['failures'] for r in calls)}")
    return str(target)
