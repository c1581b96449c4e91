"""A RefLVQA run as a release draft: the paper's Table 1 row, the funnel, model calls."""
from __future__ import annotations

import pyarrow as pa

from mmcurate.core.config import Settings
from mmcurate.core.ledger import Ledger
from mmcurate.gating.accounting import COUNTS
from mmcurate.core.specs import Heuristic, Lexical, model_names
from mmcurate.core.stages import StageResult
from mmcurate.sources.ingest import IngestResult

from .draft import ReleaseDraft
from .reflvqa_tables import reflvqa_statistics, reflvqa_tables


def reflvqa_draft(
    settings: Settings,
    version: str,
    run_id: str,
    ingested: IngestResult,
    samples: pa.Table,
    quarantine: pa.Table,
    stages: list[StageResult],
    knowledge_base: pa.Table,
    parent: str | None = None,
) -> ReleaseDraft:
    """``stages``: relevance, necessity, fact-checkability and citation results, in order;
    ``knowledge_base``: the retrieval corpus the citations were drawn from."""
    cfg = settings.reflvqa
    *filters, cited = stages
    tables = reflvqa_tables(cited.kept, knowledge_base)
    ledger = sum((s.decision_log() for s in stages), Ledger())
    skipped = {"candidate posts without a question/image/answer": sum(ingested.skipped.values())}
    funnel = [
        {"stage": "candidate QA pairs (ingest)", "remaining": samples.num_rows},
        *({"stage": s.stage, "remaining": s.kept.num_rows} for s in filters),
        {"stage": "citation", "remaining": tables["qa"].num_rows},
    ]
    call_rows = [{"stage": s.stage, "step": r["stage"], "model": r["model"], **{n: r.get(n, 0) for n in COUNTS}}
                 for s in stages for r in s.calls]
    roles = {"inspector": cfg.inspectors, "evaluator": model_names(cfg.evaluator),
             "factcheck": model_names(cfg.factcheck_model), "image_entailment": [cfg.image_entailment],
             "text_entailment": model_names(cfg.text_entailment)}
    models = [{"role": role, **settings.model(name).identity()}
              for role, names in roles.items() for name in names if name]
    notes = [f"{s.stage}: {s.reason}" for s in filters if s.skipped]
    if isinstance(cfg.evaluator, Lexical):
        notes.append("Image necessity: inspector answers were graded by token overlap with the Reddit answer "
                     "(lexical stand-in), not by an evaluator model.")
    if isinstance(cfg.factcheck_model, Heuristic):
        notes.append("Fact-checkable sentences were marked by a names-or-numbers rule (heuristic stand-in), "
                     "not by an LLM.")
    image_skipped, text_judge = cited.extra.get("image_skipped"), cited.extra.get("text_judge")
    if image_skipped:
        notes.append(f"image citations: {image_skipped}")
    if text_judge and text_judge.startswith("lexical"):
        notes.append("Text entailment used the lexical-overlap stand-in (no NLI weights offline).")
    components = {"text_corpus": " + ".join(str(spec) for spec in cfg.text_corpus)}
    for stage in stages:
        components.update(stage.components)
    return ReleaseDraft(
        benchmark="reflvqa",
        version=version,
        parent=parent,
        tables=tables,
        ledger=ledger,
        quarantine=quarantine,
        config=settings.resolved(),
        models=models,
        judge={"name": text_judge or "none", "image": cited.extra.get("image_judge")},
        components=components,
        source_files=list(ingested.source_files),
        counts={"per_stage": {row["stage"]: row["remaining"] for row in funnel},
                "per_source": {"reddit": {"ingested": samples.num_rows, "retained": tables["qa"].num_rows,
                                          "skipped": ingested.skipped, **skipped}},
                "run_id": run_id},
        statistics={"table1": reflvqa_statistics(tables), "funnel": funnel, "calls": call_rows},
        seed=cfg.seed,
        notes=notes,
    )
