"""VLM-DeflectionBench curation (the paper's Algorithm 1) as a Prefect flow.

    for each source: ingest it into canonical samples (bad records to quarantine)
    Stage I    keep a sample only if every gating model, without context, is INCORRECT
    Stage II   pair it with gold contexts and hard negatives (source-provided or mined)
    Stage III  drop it if every model is INCORRECT even with gold (oracle_rule); drop
               distractors that answer it; drop it if fewer than K_min negatives remain
    topics of the ingested questions (BERTopic), counted before and after curation
    near-duplicates within the release, against earlier versions and named releases: flagged
    publish the validated release with its ledger, statistics and manifest

Streamed: the ingested samples are read ``deflectionbench.shard_size`` at a time; each stage's
kept rows are spilled to Parquet under ``workdir/runs/<run id>/kept/`` and read back a shard
at a time by the next stage, the draft and the release writer (``core.tables.SpilledTable``),
so memory holds one shard, not the run. A stage that needs the whole pool gets it at once:
near-duplicates (only its id, question and image columns), and Stage II when a source mines
its own image pool (``image_to_image``). The release does not depend on the shard size.
"""

from __future__ import annotations

from typing import cast

from prefect import flow

from mmcurate.annotation.deflectionbench.oracle import OracleCheck
from mmcurate.annotation.deflectionbench.pairing import PairKnowledge
from mmcurate.benchmarks import register_part
from mmcurate.core.plural import counted
from mmcurate.flows import DEMO_CONFIG
from mmcurate.gating.elimination import EliminationResult
from mmcurate.gating.parametric import ParametricGate
from mmcurate.gating.prompts import prompt_set
from mmcurate.releases.curation import begin_curation
from mmcurate.releases.deflectionbench.draft import deflection_draft
from mmcurate.releases.deflectionbench.topics import TOPIC_COLUMNS, assign_topics
from mmcurate.releases.near_duplicates import near_duplicate_stage
from mmcurate.tasks.ingest import ingest_source, load_quarantine, spill_samples
from mmcurate.tasks.kb_store import prepare_kb
from mmcurate.tasks.plan import plan_run, report_spent
from mmcurate.tasks.release import publish_release
from mmcurate.tasks.stages import run_stage


@register_part("deflectionbench", "curate")
@flow(name="deflectionbench", log_prints=True)
def deflectionbench(config: str = str(DEMO_CONFIG), version: str | None = None, allow_incomplete: bool = False) -> str:
    run = begin_curation(config, "deflectionbench", version)  # before any work
    settings, cfg, run_id = run.settings, run.section, run.run_id
    near = near_duplicate_stage(settings, "deflectionbench", run.version)  # its references read

    ingested = [ingest_source(source, settings) for source in cfg.sources]
    samples = spill_samples(ingested, [source.limit for source in cfg.sources], settings.workdir / "runs" / run_id)
    quarantine = load_quarantine(ingested)
    bill = plan_run(settings, run.benchmark, samples.num_rows)  # before any model call
    topics = assign_topics(samples.select(TOPIC_COLUMNS), cfg.topics, cfg.seed)  # the pool's (appendix C: BERTopic)

    templates = prompt_set(cfg.prompts)
    rows = cfg.shard_size
    gated = run_stage(ParametricGate(cfg.gating, templates), samples, settings, run_id, rows)  # Stage I
    prepare_kb(settings, cfg, gated.kept)  # a KB beyond retrieval.memory_gb: its vector store, embedded on the runner
    pairing = PairKnowledge(cfg.retrieval, cfg.mining, sources=tuple(source.name for source in cfg.sources))
    paired = run_stage(pairing, gated.kept, settings, run_id, rows)  # Stage II
    oracle = OracleCheck(cfg.gating.pool, cfg.k_min, cfg.gating.oracle_rule, cfg.gating.force_guess, templates)
    checked = run_stage(oracle, paired.kept, settings, run_id, rows)  # Stage III
    deduped = run_stage(near, checked.kept, settings, run_id, rows)  # near-duplicates

    draft = deflection_draft(
        settings,
        run.version,
        run_id,
        pairing=paired,
        # run_stage returns what the stage's merge made: an elimination stage's own result
        gating=cast(EliminationResult, gated),
        oracle=cast(EliminationResult, checked),
        ingested={
            r.source: r.samples if s.limit is None else min(r.samples, s.limit) for r, s in zip(ingested, cfg.sources)
        },
        quarantine=quarantine,
        source_files=sorted({f for r in ingested for f in r.source_files}),
        components=paired.components,
        topics=topics,
        dedup=deduped,
        indexes=paired.extra.get("indexes"),
    )
    release = publish_release(draft, settings.mirror("releases_root"), settings.image_store(), allow_incomplete)
    report_spent(bill, gated.calls + checked.calls)
    print(f"deflectionbench {draft.version}: {counted(checked.kept.num_rows, 'sample')} -> {release}")
    return str(release)


if __name__ == "__main__":
    deflectionbench()
