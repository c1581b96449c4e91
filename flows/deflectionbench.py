"""VLM-DeflectionBench curation (the paper's Algorithm 1) as a Prefect flow.

    for each source: ingest it into canonical samples (bad records to quarantine)
    Stage I    keep a sample only if every gating model, without context, is INCORRECT
    Stage II   pair it with gold contexts and hard negatives (source-provided or mined)
    Stage III  drop it if every model is INCORRECT even with gold (oracle_rule); drop
               distractors that answer it; drop it if fewer than K_min negatives remain
    publish the validated release with its ledger, statistics and manifest
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow

from mmcurate.annotation.deflectionbench.oracle import OracleCheck
from mmcurate.annotation.deflectionbench.pairing import PairKnowledge
from mmcurate.core.config import load_config
from mmcurate.core.ids import new_run_id
from mmcurate.gating.parametric import ParametricGate
from mmcurate.releases.deflection import deflection_draft
from mmcurate.releases.rerun import refuse_changed_version
from mmcurate.releases.topics import topic_counts
from mmcurate.tasks.ingest import ingest_source, load_samples
from mmcurate.tasks.kb_store import prepare_kb
from mmcurate.tasks.plan import plan_run, report_spent
from mmcurate.tasks.release import publish_release
from mmcurate.tasks.stages import run_stage

DEMO_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "demo.yaml"


@flow(name="deflectionbench", log_prints=True)
def deflectionbench(config: str = str(DEMO_CONFIG), version: str | None = None,
                    allow_incomplete: bool = False) -> str:
    settings = load_config(config)
    cfg = settings.section("deflectionbench")
    settings.check_sources("deflectionbench")
    version = version or cfg.version
    refuse_changed_version(settings, "deflectionbench", version)  # before any work
    run_id = new_run_id()

    ingested = [ingest_source(source, settings.workdir) for source in cfg.sources]
    samples, quarantine = load_samples(ingested, [source.limit for source in cfg.sources])
    bill = plan_run(settings, "deflectionbench", samples.num_rows)                           # before any model call

    gated = run_stage(ParametricGate(cfg.gating), samples, settings, run_id)                 # Stage I
    prepare_kb(settings, gated.kept)  # a KB beyond retrieval.memory_gb: its vector store, embedded on the runner
    paired = run_stage(PairKnowledge(cfg.retrieval), gated.kept, settings, run_id)           # Stage II
    oracle = OracleCheck(cfg.gating.pool, cfg.k_min, cfg.gating.oracle_rule)
    checked = run_stage(oracle, paired.kept, settings, run_id)  # Stage III

    draft = deflection_draft(
        settings, version, run_id, gating=gated, pairing=paired, oracle=checked,
        ingested={r.source: r.samples if s.limit is None else min(r.samples, s.limit)
                  for r, s in zip(ingested, cfg.sources)},
        quarantine=quarantine, source_files=sorted({f for r in ingested for f in r.source_files}),
        components=paired.components, topics_before=topic_counts(samples), indexes=paired.extra.get("indexes"))
    release = publish_release(draft, settings.releases_root, settings.workdir / "images", allow_incomplete)
    report_spent(bill, gated.calls + checked.calls)
    print(f"deflectionbench {draft.version}: {checked.kept.num_rows} samples -> {release}")
    return str(release)


if __name__ == "__main__":
    deflectionbench()
