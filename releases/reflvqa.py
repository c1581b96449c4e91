"""A RefLVQA run as a release draft: the paper's Table 1 row, the funnel, model calls."""
from __future__ import annotations

import pyarrow as pa

from mmcurate.annotation.citations import CitationResult
from mmcurate.annotation.reflvqa_tables import reflvqa_statistics, reflvqa_tables
from mmcurate.core.config import Settings
from mmcurate.core.stages import StageResult
from mmcurate.releases.draft import ReleaseDraft
from mmcurate.sources.ingest import IngestResult


def reflvqa_draft(
    settings: Settings,
    version: str,
    run_id: str,
    ingested: IngestResult,
    samples: pa.Table,
    quarantine: pa.Table,
    stages: list[StageResult],
    cited: CitationResult,
    calls: dict[str, list[dict]],
    parent: str | None = None,
) -> ReleaseDraft:
    """``stages``: relevance, necessity and fact-checkability results; ``cited``: citations."""
    cfg = settings.reflvqa
    tables = reflvqa_tables(cited.kept, cited.knowledge_base)
    ledger = pa.concat_tables([s.ledger(run_id) for s in (*stages, cited)])
    skipped = {"candidate posts without a question/image/answer": sum(ingested.skipped.values())}
    funnel = [
        {"stage": "candidate QA pairs (ingest)", "remaining": samples.num_rows},
        *({"stage": s.stage, "remaining": s.kept.num_rows} for s in stages),
        {"stage": "citation", "remaining": tables["qa"].num_rows},
    ]
    call_rows = [{"stage": stage, "step": r["stage"], "model": r["model"], "calls": r["calls"],
                  "cache_hits": r["cache_hits"], "failures": r["failures"]}
                 for stage, rows in calls.items() for r in rows]
    evaluator = [] if cfg.evaluator == "lexical" else [cfg.evaluator]
    factcheck = [] if cfg.factcheck_model == "heuristic" else [cfg.factcheck_model]
    roles = {"inspector": cfg.inspectors, "evaluator": evaluator, "factcheck": factcheck,
             "image_entailment": [cfg.image_entailment]}
    if cfg.text_entailment.startswith("llm:"):
        roles["text_entailment"] = [cfg.text_entailment.removeprefix("llm:")]
    models = [{"role": role, **settings.model(name).identity()}
              for role, names in roles.items() for name in names if name]
    notes = [f"{s.stage}: {s.reason}" for s in stages if s.skipped]
    if cfg.evaluator == "lexical":
        notes.append("Image necessity: inspector answers were graded by token overlap with the Reddit answer "
                     "(lexical stand-in), not by an evaluator model.")
    if cfg.factcheck_model == "heuristic":
        notes.append("Fact-checkable sentences were marked by a names-or-numbers rule (heuristic stand-in), "
                     "not by an LLM.")
    if cited.image_skipped:
        notes.append(f"image citations: {cited.image_skipped}")
    if cited.text_judge and cited.text_judge.startswith("lexical"):
        notes.append("Text entailment used the lexical-overlap stand-in (no NLI weights offline).")
    return ReleaseDraft(
        benchmark="reflvqa",
        version=version,
        parent=parent,
        tables=tables,
        ledger=ledger,
        quarantine=quarantine,
        config=settings.resolved(),
        models=models,
        judge={"name": cited.text_judge or "none", "image": cited.image_judge},
        components={"text_retriever": "minilm", "cross_modal_encoder": cfg.cross_modal_encoder or "none",
                    "necessity_evaluator": cfg.evaluator or "none",
                    "factcheck": cfg.factcheck_model or "none",
                    "text_entailment": cited.text_judge or "none", "image_entailment": cited.image_judge or "none",
                    "text_corpus": " + ".join(cfg.text_corpus)},
        source_files=list(ingested.source_files),
        counts={"per_stage": {row["stage"]: row["remaining"] for row in funnel},
                "per_source": {"reddit": {"ingested": samples.num_rows, "retained": tables["qa"].num_rows,
                                          "skipped": ingested.skipped, **skipped}},
                "run_id": run_id},
        statistics={"table1": reflvqa_statistics(tables), "funnel": funnel, "calls": call_rows},
        seed=cfg.seed,
        notes=notes,
    )
