"""A DeflectionBench run as a release draft: the paper's Tables 2 and 3, funnel, calls."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mmcurate.benchmarks import register_part
from mmcurate.benchmarks.deflectionbench import RULES, DeflectionBenchConfig
from mmcurate.core.config import Settings
from mmcurate.core.ledger import Ledger
from mmcurate.core.specs import is_lexical
from mmcurate.core.stages import StageResult
from mmcurate.core.tables import SpilledTable, spill_chunks, table_batches
from mmcurate.core.text import normalize
from mmcurate.evaluation.deflectionbench.harness import harness as lmms_harness
from mmcurate.gating.elimination import EliminationResult
from mmcurate.gating.prompts import prompt_set
from mmcurate.models.accounting import COUNTS

from ..draft import ReleaseDraft
from ..kind import Distribution, ReleaseKind
from ..manifest_model import Manifest
from ..near_duplicates import near_duplicate_note
from ..plots import sorted_counts, value_counts
from .checks import deflection_checks
from .topics import TopicReading

GUESS_TEXT = {
    False: "the Stage I and III prompts ask for the answer only, as the paper does: a model that declines is "
    "NOT_ATTEMPTED",
    True: "the Stage I and III prompts also ask for a best guess when unsure (not the paper's): abstentions, which "
    "drop a Stage I sample, become answers, most of them INCORRECT, which keep it",
}


def distributions(tables: Mapping[str, pa.Table | SpilledTable]) -> dict[str, Distribution]:
    test = tables["test"]
    negatives = pa.chunked_array(
        [pc.list_value_length(batch.column(0)) for batch in table_batches(test, ["negative_contexts"])], pa.int32()
    )
    return {
        "samples per source": ("source", "samples", dict(value_counts(test.column("source")).most_common())),
        "negative contexts per sample": ("negative contexts", "samples", sorted_counts(value_counts(negatives))),
    }


KIND = ReleaseKind(
    benchmark="deflectionbench",
    pretty="VLM-DeflectionBench",
    description=(
        "VLM-DeflectionBench is a retrieval-dependent multimodal benchmark: samples that strong models "
        "answer from parametric memory alone are removed, so answering needs the retrieved context, and each "
        "sample carries gold contexts and hard negative contexts (distractors) for the four evaluation "
        "scenarios (parametric, oracle, realistic, adversarial)."
    ),
    configs=("test",),
    checks=deflection_checks,
    distributions=distributions,
    harness=lmms_harness,
)
register_part("deflectionbench", "release")(KIND)

ROW_BATCH = 1024  # rows turned into Python dicts at a time
RELEASE_PART_ROWS = 50_000  # rows of a spilled release table written at a time


def _modality(contexts: list[dict]) -> str:
    kinds = {c["modality"] for c in contexts}
    return "+".join(sorted(kinds)) if kinds else "none"


def _rows(table: pa.Table | SpilledTable, columns: list[str] | None = None) -> Iterator[dict]:
    """The rows of ``table`` as dicts, a batch at a time (Python objects for one batch only)."""
    for batch in table_batches(table, columns, ROW_BATCH):
        yield from batch.to_pylist()


def per_source_table(
    ingested: dict[str, int | None],
    kept: pa.Table | SpilledTable,
    carried: dict[str, int] | None = None,
    parent: str | None = None,
) -> list[dict]:
    """Retained samples per source, retention % of the ingested, query and context modality
    (Table 2); a re-curation adds the samples ``carried`` over from its ``parent`` version
    (column ``in <parent>``) after the ingested ones it inherits."""
    retained: Counter[str] = Counter()
    query: dict[str, Counter[str]] = {}
    context: dict[str, Counter[str]] = {}
    for r in _rows(kept, ["source", "images", "gold_contexts", "negative_contexts"]):
        source = r["source"]
        retained[source] += 1
        query.setdefault(source, Counter())["image+text" if r["images"] else "text"] += 1
        context.setdefault(source, Counter())[_modality(r["gold_contexts"] + r["negative_contexts"])] += 1
    table = []
    for source in sorted(set(ingested) | set(carried or {})):
        n, read = retained[source], ingested.get(source)
        table.append(
            {
                "source": source,
                "ingested": read,
                **({f"in {parent}": carried.get(source, 0)} if carried is not None else {}),
                "retained": n,
                "retention_pct": round(100.0 * n / read, 2) if read else (None if read is None else 0.0),
                "query_modality": ", ".join(sorted(query.get(source, {}))) or "-",
                "context_modality": ", ".join(sorted(context.get(source, {}))) or "-",
            }
        )
    return table


def global_table(kept: pa.Table | SpilledTable) -> list[dict]:
    """Global statistics of the retained set (Table 3). Unique questions compare normalised
    text (``core.text.normalize``); unique query images count the images asked about, not
    the images among the contexts. Folded over row batches: a large release is never held
    as Python rows at once."""
    n = kept.num_rows
    sums: Counter[str] = Counter()
    sources: set[str] = set()
    questions: set[str] = set()
    query_images: set[str] = set()
    for r in _rows(kept):
        sources.add(r["source"])
        questions.add(normalize(r["question"]))
        query_images.update(r["images"])
        sums["with_image"] += bool(r["images"])
        sums["question_words"] += len(r["question"].split())
        if r["answers"]:
            sums["answered"] += 1
            sums["answer_words"] += len(r["answers"][0].split())
        sums["gold"] += len(r["gold_contexts"])
        sums["negatives"] += len(r["negative_contexts"])
        sums["text_negatives"] += sum(1 for c in r["negative_contexts"] if c["modality"] == "text")
        sums["image_negatives"] += sum(1 for c in r["negative_contexts"] if c["modality"] == "image")

    def mean(total: int, count: int) -> float:
        return round(total / count, 2) if count else 0.0

    stats = {
        "samples": n,
        "unique_questions": len(questions),
        "unique_query_images": len(query_images),
        "sources": len(sources),
        "with_query_image_pct": round(100.0 * sums["with_image"] / n, 2) if n else 0.0,
        "mean_question_words": mean(sums["question_words"], n),
        "mean_answer_words": mean(sums["answer_words"], sums["answered"]),
        "mean_gold_contexts": mean(sums["gold"], n),
        "mean_negatives": mean(sums["negatives"], n),
        "text_negatives": sums["text_negatives"],
        "image_negatives": sums["image_negatives"],
    }
    return [{"statistic": key, "value": value} for key, value in stats.items()]


def inherited_ingest(manifest: Manifest) -> dict[str, int | None]:
    """The samples per source a release ingested from the raw sources (a re-curation inherits
    them); None for a source its manifest does not count."""
    per_source = manifest.counts.per_source
    return {source: entry.get("ingested") if isinstance(entry, dict) else None for source, entry in per_source.items()}


def funnel(entered: int, after_gating: int, after_pairing: int, released: int, parent: str | None = None) -> list[dict]:
    """Samples remaining after each stage (quarantined raw records never became samples); the
    first row is what entered Stage I: the ingested samples, or a re-curation's ``parent``'s."""
    return [
        {"stage": "ingested" if parent is None else f"in {parent}", "remaining": entered},
        {"stage": "I parametric gating", "remaining": after_gating},
        {"stage": "II knowledge pairing", "remaining": after_pairing},
        {"stage": "III quality control", "remaining": released},
    ]


LEAKAGE_TEXT = {
    "none": "only the gold contexts were removed from the mined passages (the paper's eq. 2); passages that leak "
    "the answer were left to the Stage III distractor check (eq. 5)",
    "answer": "the gold contexts and every passage holding a gold answer were removed from the mined passages "
    "before reranking (stricter than the paper's eq. 2)",
    "answer_or_overlap": "the gold contexts, every passage holding a gold answer and every passage overlapping a "
    "gold text were removed from the mined passages before reranking (stricter than the "
    "paper's eq. 2)",
}
MINING_RULES = {"gold": "is a gold context (eq. 2)", "answer": "holds a gold answer", "overlap": "overlaps a gold text"}


def mining_table(counts: Mapping[str, int]) -> list[dict]:
    """Mined candidate passages and what each leakage rule removed (``pairing`` stage counts);
    empty when nothing was mined."""
    if not counts.get("mined_candidates"):
        return []
    return [
        {"rule": "candidate passages from the top pages", "passages": counts["mined_candidates"]},
        *(
            {"rule": f"removed: {text}", "passages": counts.get(f"mined_removed_{rule}", 0)}
            for rule, text in MINING_RULES.items()
        ),
    ]


def readings_table(
    cfg: DeflectionBenchConfig, components: Mapping[str, str], prompts_used: str, topics: TopicReading | None = None
) -> list[dict]:
    """The choices the paper leaves open or this run made differently, each with the setting
    used and what it means (``prompts_used``: ``PromptSet.describe`` of the templates used;
    ``topics``: the reading the topic table was made with)."""
    rows = [
        {"setting": "gating.rule", "value": cfg.gating.rule, "reading": RULES[cfg.gating.rule].stage_i},
        {
            "setting": "gating.oracle_rule",
            "value": cfg.gating.oracle_rule,
            "reading": RULES[cfg.gating.oracle_rule].stage_iii,
        },
        {
            "setting": "gating.force_guess",
            "value": str(cfg.gating.force_guess).lower(),
            "reading": GUESS_TEXT[cfg.gating.force_guess],
        },
        {
            "setting": "prompts",
            "value": "built-in" if cfg.prompts is None else cfg.prompts.file.name,
            "reading": prompts_used,
        },
    ]
    if topics is not None:
        rows.append({"setting": "topics", "value": topics.reading, "reading": topics.note})
    if "leakage_filter" in components:
        rows.append(
            {
                "setting": "retrieval.leakage_filter",
                "value": components["leakage_filter"],
                "reading": LEAKAGE_TEXT[components["leakage_filter"]],
            }
        )
    if "reranker" in components:
        paper = "contriever" in components["reranker"]
        rows.append(
            {
                "setting": "retrieval.reranker",
                "value": components["reranker"],
                "reading": "the paper's Contriever" if paper else "a stand-in for the paper's Contriever",
            }
        )
    return rows


def calls_table(stage_rows: dict[str, list[dict]], naive: dict[str, int]) -> list[dict]:
    """Model calls per pipeline stage, model and step (answering, judging), with the usage
    tokens backends reported, then a total row per stage beside the naive count (every
    model on every item, no early elimination)."""
    rows = []
    for stage, counted in stage_rows.items():
        for r in counted:
            rows.append(
                {
                    "stage": stage,
                    "step": r["stage"],
                    "model": r["model"],
                    **{name: r.get(name, 0) for name in COUNTS},
                    "naive": None,
                }
            )
        rows.append(
            {
                "stage": stage,
                "step": "total",
                "model": "all",
                **{name: sum(r.get(name, 0) for r in counted) for name in COUNTS},
                "naive": naive.get(stage, 0),
            }
        )
    return rows


def judge_errors(ledger: Ledger) -> list[dict]:
    """Judge errors per model (answers the judge could not grade; never counted as grades)."""
    counts: Counter[str] = Counter()
    for batch in ledger.batches(["model", "verdict"]):
        errors = batch.filter(pc.equal(batch.column("verdict"), "JUDGE_ERROR"))
        counts.update(errors.column("model").to_pylist())
    return [{"model": model, "judge_errors": n} for model, n in sorted(counts.items())]


def release_table(kept: pa.Table | SpilledTable, seed: int) -> pa.Table | SpilledTable:
    """The released rows: canonical samples plus the shuffling seed evaluations must use (a
    spilled table is written again beside its parts, a part at a time, with the column added)."""
    if isinstance(kept, pa.Table):
        return kept.append_column("shuffle_seed", pa.array([seed] * kept.num_rows, pa.int64()))
    schema = kept.schema.append(pa.field("shuffle_seed", pa.int64()))
    parts = (
        part.append_column("shuffle_seed", pa.array([seed] * part.num_rows, pa.int64()))
        for part in kept.chunks(RELEASE_PART_ROWS)
    )
    return spill_chunks(parts, kept.parts[0].parent, "release", schema)


def deflection_draft(
    settings: Settings,
    version: str,
    run_id: str,
    *,
    gating: EliminationResult,
    pairing: StageResult | None,
    oracle: EliminationResult,
    ingested: dict[str, int | None],
    source_files: Sequence[str | dict[str, Any]],  # paths, or a re-curation's inherited entries
    quarantine: pa.Table,
    components: Mapping[str, str],
    parent: dict[str, str] | None = None,
    history: pa.Table | None = None,
    removed: list[dict] | None = None,
    topics: TopicReading | None = None,
    dedup: StageResult | None = None,
    indexes: list[dict] | None = None,
    carried: dict[str, int] | None = None,
) -> ReleaseDraft:
    """Everything the release writer needs from one DeflectionBench run.

    ``ingested``: samples per source read from the raw sources (quarantined records are not
    samples); they entered Stage I. A re-curation passes its parent's (what was ingested, once),
    the parent's released samples per source as ``carried`` (what entered Stage I this time),
    no ``pairing`` (contexts come from the parent release) and the parent's ledger as ``history``.
    ``topics``: the topics of the pool that entered Stage I (``releases.deflectionbench.topics``; a re-curation
    passes its parent's); None leaves the topic table out and says so.
    ``dedup``: the near-duplicate check (``annotation.dedup``) of what Stage III kept.
    ``indexes``: the vector indexes Stage II searched (``retrieval.kb_pages`` records).
    """
    cfg = DeflectionBenchConfig.of(settings)
    kept = (dedup or oracle).kept
    runs = [s for s in (gating, pairing, oracle, dedup) if s is not None]
    ledger = sum((s.decision_log() for s in runs), Ledger([history] if history is not None else []))
    if topics is not None and topics.recorded:
        ledger += Ledger([topics.ledger(run_id)])
    models = [{"role": role, **settings.model(name).identity()} for role, name in settings.roles("deflectionbench")]
    # a fresh run counts every source it ingested (None: a count a re-curation's parent did not record)
    entered = sum(carried.values()) if carried is not None else sum(n for n in ingested.values() if n is not None)
    parent_version = parent.get("version") if isinstance(parent, dict) else parent
    after_pairing = pairing.kept.num_rows if pairing else gating.kept.num_rows
    judge = gating.components.get("judge")
    statistics = {
        "per_source": per_source_table(ingested, kept, carried, parent_version),
        "global": global_table(kept),
        "funnel": funnel(
            entered, gating.kept.num_rows, after_pairing, kept.num_rows, parent_version if carried is not None else None
        ),
        "calls": calls_table(
            {"I": gating.calls, "III": oracle.calls}, {"I": gating.naive_calls, "III": oracle.naive_calls}
        ),
        "convergence": gating.convergence,
        "judge_errors": judge_errors(ledger),
        "topics": topics.table(kept["sample_id"].to_pylist()) if topics is not None else [],
        "mining": mining_table(pairing.counts) if pairing else [],
        "mining_per_source": pairing.extra.get("mining", []) if pairing else [],
        "readings": readings_table(
            cfg,
            components,
            prompt_set(cfg.prompts).describe(
                [t for t in (gating.components.get("stage_i_prompt"), oracle.components.get("stage_iii_prompt")) if t]
            ),
            topics,
        ),
        "near_duplicates": dedup.extra["near_duplicates"] if dedup else [],
    }
    retrieval = (
        f"Retrieval: {components['text_encoder']} (text), {components['image_encoder']} (images)."
        if "text_encoder" in components
        else "Retrieval: none; every sample came with its source's negatives."
    )
    notes = [
        retrieval,
        f"Judged by {judge}.",
        f"Rules: Stage I gating {cfg.gating.rule}, Stage III solvability {cfg.gating.oracle_rule} "
        f"({RULES[cfg.gating.oracle_rule].stage_iii}).",
    ]
    if "reranker" in components and "contriever" not in components["reranker"]:
        notes.append(
            f"Mined passages were reranked with {components['reranker']}, a stand-in for the paper's "
            "Contriever (set retrieval.reranker: contriever:<folder>)."
        )
    if "descriptor" in components.get("image_encoder", ""):
        notes.append(
            "Image negatives were mined with a classical colour/gradient descriptor, not CLIP: "
            "they are visually similar, not semantically similar."
        )
    if topics is None:
        notes.append("Topic distribution before curation is unknown (the parent release does not record it).")
    if is_lexical(judge):
        notes.append("The lexical judge (normalised match plus token containment) stands in for an LLM judge.")
    if dedup is not None:
        notes.append(near_duplicate_note(dedup))
    return ReleaseDraft(
        kind=KIND,
        version=version,
        parent=parent,
        tables={"test": release_table(kept, cfg.seed)},
        ledger=ledger,
        quarantine=quarantine,
        config=settings.resolved(),
        models=models,
        judge={"name": judge},
        components=dict(components),
        source_files=list(source_files),
        counts={
            "per_stage": {row["stage"]: row["remaining"] for row in statistics["funnel"]},
            "quarantined": quarantine.num_rows,
            "per_source": {
                row["source"]: {"ingested": row["ingested"], "retained": row["retained"]}
                for row in statistics["per_source"]
            },
            "run_id": run_id,
        },
        statistics=statistics,
        seed=cfg.seed,
        k_min=cfg.k_min,
        removed=removed or [],
        notes=notes,
        indexes=indexes or [],
    )
