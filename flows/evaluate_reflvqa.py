"""RefLVQA's evaluation (seed 004, section 4): a RAG run over the release's own knowledge base.

    retrieve     top-100 documents for the question, rerank, keep the top K (5)
    answer       the model cites the numbered documents per sentence
    grade        groundedness, completeness, relevance; retrieval quality of the KB
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
from mmcurate.evaluation.run_record import record_release
from mmcurate.evaluation.reflvqa import FAILED
from mmcurate.evaluation.runs import evaluation_folder
from mmcurate.releases.reader import open_release
from mmcurate.releases.reflvqa_tables import KNOWLEDGE_BASE
from mmcurate.releases.unembed import canonical_rows
from mmcurate.tasks.evaluate import answer_reflvqa, summarise_reflvqa

DEMO_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "demo.yaml"


@flow(name="evaluate-reflvqa", log_prints=True)
def evaluate_reflvqa(release: str, model: str, config: str = str(DEMO_CONFIG), out: str | None = None,
                     allow_incomplete: bool = False) -> str:
    settings = load_config(config)
    name = settings.add_model(model).name
    bench = open_release(release)
    target = evaluation_folder(settings, bench, name, out)
    cfg = settings.evaluation.reflvqa
    store = ImageStore(settings.workdir / "images")
    qa = canonical_rows(bench, store, "qa")
    documents = pa.Table.from_pylist(canonical_rows(bench, store, "knowledge_base"), schema=KNOWLEDGE_BASE)
    run, components, notes, calls = answer_reflvqa(qa, documents, settings, name, new_run_id())
    failed = [row["error"] for row in run.answers.select(["status", "error"]).to_pylist() if row["status"] == FAILED]
    incomplete = check_failures(name, len(failed), run.answers.num_rows, failed[0] if failed else None,
                                allow_incomplete)
    notes = [incomplete, *notes] if incomplete else notes
    evaluators = sorted({components[f"{m}_evaluator"] for m in ("groundedness", "completeness", "relevance")})
    stand_in = " (token-overlap stand-in, not an evaluator model)" if any(map(is_lexical, evaluators)) else ""
    setting = f"RAG top-{cfg.top_k}" if cfg.cutoff is None else f"RAG cutoff {cfg.cutoff}"
    title = (f"{name} on reflvqa {bench.version}: {setting} of {cfg.candidates} ({components['retriever']}, "
             f"reranked by {components['reranker']}); graded by {', '.join(evaluators)}{stand_in}")
    table = summarise_reflvqa(run, target, title, setting, notes)
    record_release(target, bench.benchmark, bench.version, bench.content_id)
    print(table)
    print(f"answers, grades, metrics and Hit@K plot -> {target}; model calls: {sum(r['calls'] for r in calls)}, "
          f"failed: {sum(r['failures'] for r in calls)}")
    return str(target)
