"""A DeflectionBench run as a release draft: the paper's Tables 2 and 3, funnel, calls."""
from __future__ import annotations

from collections import Counter

import pyarrow as pa

from mmcurate.core.config import Settings
from mmcurate.core.stages import StageResult
from mmcurate.core.text import normalize

from .draft import ReleaseDraft
from .topics import topic_counts, topic_table


RULE_TEXT = {
    "all_incorrect": "a sample is discarded only when every gating model is INCORRECT with the gold evidence",
    "none_correct": "a sample is discarded unless some gating model is CORRECT with the gold evidence",
}


def _modality(contexts: list[dict]) -> str:
    kinds = {c["modality"] for c in contexts}
    return "+".join(sorted(kinds)) if kinds else "none"


def per_source_table(ingested: dict[str, int], kept: pa.Table) -> list[dict]:
    """Retained samples per source, retention %, query and context modality (Table 2)."""
    rows = kept.to_pylist()
    by_source: dict[str, list[dict]] = {}
    for row in rows:
        by_source.setdefault(row["source"], []).append(row)
    table = []
    for source in sorted(ingested):
        items = by_source.get(source, [])
        query = Counter("image+text" if r["images"] else "text" for r in items)
        context = Counter(_modality(r["gold_contexts"] + r["negative_contexts"]) for r in items)
        table.append(
            {
                "source": source,
                "ingested": ingested[source],
                "retained": len(items),
                "retention_pct": round(100.0 * len(items) / ingested[source], 2) if ingested[source] else 0.0,
                "query_modality": ", ".join(sorted(query)) or "-",
                "context_modality": ", ".join(sorted(context)) or "-",
            }
        )
    return table


def global_table(kept: pa.Table) -> list[dict]:
    """Global statistics of the retained set (Table 3). Unique questions compare normalised
    text (``core.text.normalize``); unique query images count the images asked about, not
    the images among the contexts."""
    rows = kept.to_pylist()
    n = len(rows)

    def mean(values: list[float]) -> float:
        return round(sum(values) / len(values), 2) if values else 0.0

    negatives = [r["negative_contexts"] for r in rows]
    stats = {
        "samples": n,
        "unique_questions": len({normalize(r["question"]) for r in rows}),
        "unique_query_images": len({s for r in rows for s in r["images"]}),
        "sources": len({r["source"] for r in rows}),
        "with_query_image_pct": round(100.0 * sum(bool(r["images"]) for r in rows) / n, 2) if n else 0.0,
        "mean_question_words": mean([len(r["question"].split()) for r in rows]),
        "mean_answer_words": mean([len(r["answers"][0].split()) for r in rows if r["answers"]]),
        "mean_gold_contexts": mean([len(r["gold_contexts"]) for r in rows]),
        "mean_negatives": mean([len(c) for c in negatives]),
        "text_negatives": sum(1 for cs in negatives for c in cs if c["modality"] == "text"),
        "image_negatives": sum(1 for cs in negatives for c in cs if c["modality"] == "image"),
    }
    return [{"statistic": key, "value": value} for key, value in stats.items()]


def funnel(ingested: int, after_gating: int, after_pairing: int, released: int) -> list[dict]:
    """Samples remaining after each stage (quarantined raw records never became samples)."""
    return [
        {"stage": "ingested", "remaining": ingested},
        {"stage": "I parametric gating", "remaining": after_gating},
        {"stage": "II knowledge pairing", "remaining": after_pairing},
        {"stage": "III quality control", "remaining": released},
    ]


def calls_table(stage_rows: dict[str, list[dict]], naive: dict[str, int]) -> list[dict]:
    """Model calls per pipeline stage, model and step (answering, judging), then a total row
    per stage beside the naive count (every model on every item, no early elimination)."""
    rows = []
    for stage, counted in stage_rows.items():
        for r in counted:
            rows.append({"stage": stage, "step": r["stage"], "model": r["model"], "calls": r["calls"],
                         "cache_hits": r["cache_hits"], "failures": r["failures"], "naive": None})
        rows.append({"stage": stage, "step": "total", "model": "all",
                     "calls": sum(r["calls"] for r in counted),
                     "cache_hits": sum(r["cache_hits"] for r in counted),
                     "failures": sum(r["failures"] for r in counted),
                     "naive": naive.get(stage, 0)})
    return rows


def judge_errors(ledger: pa.Table) -> list[dict]:
    """Judge errors per model (answers the judge could not grade; never counted as grades)."""
    counts = Counter(
        row["model"] for row in ledger.select(["model", "verdict"]).to_pylist() if row["verdict"] == "JUDGE_ERROR"
    )
    return [{"model": model, "judge_errors": n} for model, n in sorted(counts.items())]


def release_table(kept: pa.Table, seed: int) -> pa.Table:
    """The released rows: canonical samples plus the shuffling seed evaluations must use."""
    return kept.append_column("shuffle_seed", pa.array([seed] * kept.num_rows, pa.int64()))


def deflection_draft(
    settings: Settings,
    version: str,
    run_id: str,
    *,
    gating: StageResult,
    pairing: StageResult | None,
    oracle: StageResult,
    ingested: dict[str, int],
    source_files: list[str],
    quarantine: pa.Table,
    components: dict[str, str],
    parent: str | None = None,
    history: pa.Table | None = None,
    removed: list[dict] | None = None,
    topics_before: dict[str, int] | None = None,
) -> ReleaseDraft:
    """Everything the release writer needs from one DeflectionBench run.

    ``ingested``: samples per source that entered Stage I. A re-curation passes no
    ``pairing`` (contexts come from the parent release) and the parent's ledger as ``history``.
    ``topics_before``: samples per topic (``releases.topics``) of the pool that entered Stage I
    (a re-curation passes its parent's); None leaves the topic table out and says so.
    """
    cfg = settings.deflectionbench
    kept = oracle.kept
    runs = [s for s in (gating, pairing, oracle) if s is not None]
    ledger = pa.concat_tables(([history] if history is not None else []) + [s.ledger() for s in runs])
    models = [{"role": role, **settings.model(name).identity()} for role, name in settings.roles("deflectionbench")]
    entered = sum(ingested.values())
    after_pairing = pairing.kept.num_rows if pairing else gating.kept.num_rows
    judge = gating.components.get("judge")
    statistics = {
        "per_source": per_source_table(ingested, kept),
        "global": global_table(kept),
        "funnel": funnel(entered, gating.kept.num_rows, after_pairing, kept.num_rows),
        "calls": calls_table({"I": gating.calls, "III": oracle.calls},
                             {"I": gating.naive_calls, "III": oracle.naive_calls}),
        "convergence": gating.convergence,
        "judge_errors": judge_errors(ledger),
        "topics": topic_table(topics_before, topic_counts(kept)) if topics_before is not None else [],
    }
    notes = [f"Retrieval: {components.get('text_encoder')} (text), {components.get('image_encoder')} (images).",
             f"Judged by {judge}.",
             f"Rules: Stage I gating {cfg.gating.rule}, Stage III solvability {cfg.gating.oracle_rule} "
             f"({RULE_TEXT[cfg.gating.oracle_rule]})."]
    if "descriptor" in components.get("image_encoder", ""):
        notes.append("Image negatives were mined with a classical colour/gradient descriptor, not CLIP: "
                     "they are visually similar, not semantically similar.")
    if topics_before is None:
        notes.append("Topic distribution before curation is unknown (the parent release does not record it).")
    if judge and judge.startswith("lexical"):
        notes.append("The lexical judge (normalised match plus token containment) stands in for an LLM judge.")
    return ReleaseDraft(
        benchmark="deflectionbench",
        version=version,
        parent=parent,
        tables={"test": release_table(kept, cfg.seed)},
        ledger=ledger,
        quarantine=quarantine,
        config=settings.resolved(),
        models=models,
        judge={"name": judge},
        components=components,
        source_files=source_files,
        counts={
            "per_stage": {row["stage"]: row["remaining"] for row in statistics["funnel"]},
            "quarantined": quarantine.num_rows,
            "per_source": {row["source"]: {"ingested": row["ingested"], "retained": row["retained"]}
                           for row in statistics["per_source"]},
            "run_id": run_id,
        },
        statistics=statistics,
        seed=cfg.seed,
        k_min=cfg.k_min,
        removed=removed or [],
        notes=notes,
    )
