"""A RefLVQA run as a release draft: the paper's Table 1 row, the funnel, model calls."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping

import pyarrow as pa

from mmcurate.benchmarks import register_part
from mmcurate.benchmarks.reflvqa import RefLVQAConfig
from mmcurate.core.config import Settings
from mmcurate.core.images import ImageStore
from mmcurate.core.ledger import Ledger
from mmcurate.core.plural import counted
from mmcurate.core.schema import DOCUMENT, SAMPLE, SENTENCE
from mmcurate.core.specs import Heuristic, Lexical, is_lexical, model_names
from mmcurate.core.stages import StageResult
from mmcurate.evaluation.reflvqa.harness import harness as lmms_harness
from mmcurate.models.accounting import COUNTS
from mmcurate.sources.ingest import IngestResult

from ..draft import ReleaseDraft
from ..kind import Distribution, ReleaseKind
from ..near_duplicates import near_duplicates
from ..plots import sorted_counts, value_counts
from ..reader import LEDGER_FILE, Release
from ..unembed import canonical_rows
from .checks import reflvqa_checks
from .tables import reflvqa_statistics, reflvqa_tables


def distributions(tables: Mapping[str, pa.Table]) -> dict[str, Distribution]:
    sentences = Counter(len(s) for s in tables["qa"].column("sentences").to_pylist())
    return {
        "documents by modality": (
            "modality",
            "cited documents",
            dict(value_counts(tables["documents"].column("modality")).most_common()),
        ),
        "sentences per answer": ("sentences", "answers", sorted_counts(sentences)),
    }


KIND = ReleaseKind(
    benchmark="reflvqa",
    pretty="RefLVQA",
    description=(
        "RefLVQA is a long-form visual question answering benchmark with references: questions asked about "
        "images on Reddit, long-form answers split into sentences, and for each fact-checkable sentence the "
        "text and image documents of a knowledge base that support it, so a system can be scored on "
        "groundedness, completeness and relevance."
    ),
    configs=("qa", "documents", "knowledge_base"),
    checks=reflvqa_checks,
    distributions=distributions,
    harness=lmms_harness,
)
register_part("reflvqa", "release")(KIND)


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
    """``stages``: relevance, necessity, fact-checkability and citation results, in order, then
    the sentence verification when it ran, then the near-duplicate check (``annotation.dedup``)
    when it ran; ``knowledge_base``: the retrieval corpus the citations were drawn from."""
    cfg = RefLVQAConfig.of(settings)
    names = [s.stage for s in stages]
    cited = stages[names.index("citation")]
    filters = stages[: names.index("citation")]
    tables = reflvqa_tables(stages[-1].kept, knowledge_base)
    ledger = sum((s.decision_log() for s in stages), Ledger())
    skipped = {"candidate posts without a question/image/answer": sum(ingested.skipped.values())}
    funnel = [
        {"stage": "candidate QA pairs (ingest)", "remaining": samples.num_rows},
        *({"stage": s.stage, "remaining": s.kept.num_rows} for s in filters),
        *({"stage": s.stage, "remaining": tables["qa"].num_rows} for s in stages[len(filters) :]),
    ]
    call_rows = [
        {"stage": s.stage, "step": r["stage"], "model": r["model"], **{n: r.get(n, 0) for n in COUNTS}}
        for s in stages
        for r in s.calls
    ]
    models = [{"role": role, **settings.model(name).identity()} for role, name in settings.roles("reflvqa")]
    notes = [f"{s.stage}: {s.reason}" for s in filters if s.skipped]
    if isinstance(cfg.evaluator, Lexical):
        notes.append(
            "Image necessity: inspector answers were graded by token overlap with the Reddit answer "
            "(lexical stand-in), not by an evaluator model."
        )
    if isinstance(cfg.factcheck_model, Heuristic):
        notes.append(
            "Fact-checkable sentences were marked by a names-or-numbers rule (heuristic stand-in), not by an LLM."
        )
    image_skipped, text_judge = cited.extra.get("image_skipped"), cited.extra.get("text_judge")
    if image_skipped:
        notes.append(f"image citations: {image_skipped}")
    if is_lexical(text_judge):
        notes.append("Text entailment used the lexical-overlap stand-in (no NLI weights offline).")
    if cfg.cutoff is not None:
        notes.append(
            f"Text citations: each sentence's {cfg.top_text} retrieved documents were cut with {cfg.cutoff} "
            f"(CRUISE's MAD rule over cosine scores, negatives as 0) before entailment: "
            f"{cited.counts.get('cutoff_kept', 0)} kept, {cited.counts.get('cutoff_cut', 0)} cut."
        )
    if cfg.verification is not None:
        verified = stages[-1].counts
        claims = (
            "a model"
            if model_names(cfg.verification.claims)
            else "the heuristic stand-in (one rule-typed claim per sentence, heuristic-claims-v1), not an LLM"
        )
        notes.append(
            f"Sentence verification (Kestrel): claims extracted by {claims}, checked by "
            f"{cfg.verification.verifier}: {verified.get('supported', 0)} supported, "
            f"{verified.get('contradicted', 0)} contradicted, {verified.get('insufficient', 0)} insufficient, "
            f"{verified.get('errors', 0)} errors; "
            f"{counted(verified.get('changed', 0), 'sentence')} changed by the gate."
        )
    components = {"text_corpus": " + ".join(str(spec) for spec in cfg.text_corpus)}
    for stage in stages:
        components.update(stage.components)
    return ReleaseDraft(
        kind=KIND,
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
        counts={
            "per_stage": {row["stage"]: row["remaining"] for row in funnel},
            "per_source": {
                "reddit": {
                    "ingested": samples.num_rows,
                    "retained": tables["qa"].num_rows,
                    "skipped": ingested.skipped,
                    **skipped,
                }
            },
            "run_id": run_id,
        },
        statistics={
            "table1": reflvqa_statistics(tables),
            "funnel": funnel,
            "calls": call_rows,
            **near_duplicates(stages, notes),
        },
        seed=cfg.seed,
        notes=notes,
    )


def qa_samples(parent: Release, store: ImageStore) -> pa.Table:
    """A RefLVQA release's QA pairs as the stages' sample rows (images back in ``store``)."""
    source = next(iter(parent.manifest.counts.per_source or {"reddit": None}))
    rows = [
        {
            "sample_id": r["sample_id"],
            "source": source,
            "source_id": r["source_id"],
            "question": r["question"],
            "answers": [r["answer"]],
            "images": r["images"],
            "sentences": r["sentences"],
            "meta": r["meta"],
        }
        for r in canonical_rows(parent, store, "qa")
    ]
    return pa.Table.from_pylist(
        rows,
        schema=pa.schema(
            [
                *(SAMPLE.field(n) for n in ("sample_id", "source", "source_id", "question", "answers", "images")),
                pa.field("sentences", pa.list_(SENTENCE)),
                SAMPLE.field("meta"),
            ]
        ),
    )


def release_corpus(parent: Release, store: ImageStore) -> pa.Table:
    """The parent's knowledge base as DOCUMENT rows: provenance from its ``documents`` config
    where the document was cited, else the knowledge base it came from."""
    known = {
        r["doc_id"]: r["provenance"] for r in parent.table("documents").select(["doc_id", "provenance"]).to_pylist()
    }
    where = json.dumps({"corpus": f"knowledge_base of {parent.benchmark} {parent.version}"}, sort_keys=True)
    rows = [{**r, "provenance": known.get(r["doc_id"], where)} for r in canonical_rows(parent, store, "knowledge_base")]
    return pa.Table.from_pylist(rows, schema=DOCUMENT)


def reflvqa_recuration_draft(
    settings: Settings,
    version: str,
    run_id: str,
    parent: Release,
    parent_record: dict[str, str],
    stages: list[StageResult],
    knowledge_base: pa.Table,
) -> ReleaseDraft:
    """A re-curation of ``parent``: ``stages`` (image necessity with the inspectors, the citation
    re-check, the near-duplicate check) over its QA pairs; everything else is inherited from the parent."""
    tables = reflvqa_tables(stages[-1].kept, knowledge_base)
    m = parent.manifest
    inherited = [row for row in m.statistics.get("funnel") or []]
    funnel = [*inherited, *({"stage": f"{s.stage} ({version})", "remaining": s.kept.num_rows} for s in stages)]
    call_rows = [
        {"stage": s.stage, "step": r["stage"], "model": r["model"], **{n: r.get(n, 0) for n in COUNTS}}
        for s in stages
        for r in s.calls
    ]
    components = {**m.components}
    for stage in stages:
        components.update(stage.components)
    cited = next(s for s in stages if s.stage == "citation")
    text_judge = cited.extra.get("text_judge") or (m.judge.name if m.judge else None)
    notes = [
        *m.notes,
        f"Re-curated from {parent.version}: inspectors {', '.join(RefLVQAConfig.of(settings).inspectors)}; text citations "
        f"decided by {text_judge} over the documents {parent.version} judged.",
    ]
    counts = {**m.counts.recorded(), "per_stage": {row["stage"]: row["remaining"] for row in funnel}, "run_id": run_id}
    counts.pop("rows", None)
    counts.pop("bytes", None)
    per_source = counts.get("per_source") or {}
    counts["per_source"] = {name: {**value, "retained": tables["qa"].num_rows} for name, value in per_source.items()}
    return ReleaseDraft(
        kind=KIND,
        version=version,
        parent=parent_record,
        tables=tables,
        ledger=sum((s.decision_log() for s in stages), Ledger([parent.path / LEDGER_FILE])),
        quarantine=parent.quarantine,
        config=settings.resolved(),
        models=[{"role": role, **settings.model(name).identity()} for role, name in settings.roles("reflvqa")],
        judge={**(m.judge.recorded() if m.judge else {}), "name": text_judge},
        components=components,
        source_files=[entry.recorded() for entry in m.source_files],
        counts=counts,
        statistics={
            "table1": reflvqa_statistics(tables),
            "funnel": funnel,
            "calls": call_rows,
            **near_duplicates(stages, notes),
        },
        seed=RefLVQAConfig.of(settings).seed,
        notes=notes,
    )
