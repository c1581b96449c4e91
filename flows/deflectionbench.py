"""VLM-DeflectionBench curation (the paper's Algorithm 1) as a Prefect flow.

    for each source: ingest it into canonical samples (bad records to quarantine)
    Stage I    keep a sample only if every gating model, without context, is INCORRECT
    Stage II   pair it with gold contexts and hard negatives (source-provided or mined)
    Stage III  drop it if no model answers with gold; drop distractors that answer it;
               drop it if fewer than K_min negatives remain
    publish the validated release with its ledger, statistics and manifest
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow

from mmcurate.core.config import load_config
from mmcurate.core.errors import ConfigError
from mmcurate.core.ids import new_run_id
from mmcurate.releases.deflection import deflection_draft
from mmcurate.tasks.deflectionbench import check_with_oracle, gate_parametrically, pair_with_knowledge, per_shard
from mmcurate.tasks.ingest import ingest_source, load_samples
from mmcurate.tasks.release import publish_release

DEMO_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "demo.yaml"


@flow(name="deflectionbench", log_prints=True)
def deflectionbench(config: str = str(DEMO_CONFIG), version: str | None = None) -> str:
    settings = load_config(config)
    cfg = settings.deflectionbench
    if cfg is None:
        raise ConfigError(f"{config} has no 'deflectionbench' section")
    run_id = new_run_id()

    ingested = [ingest_source(source, settings.workdir) for source in cfg.sources]
    limits = [source.limit for source in cfg.sources]
    samples, quarantine = load_samples(ingested, limits)

    stage_i = per_shard(gate_parametrically, samples, settings, run_id)
    stage_ii = pair_with_knowledge(stage_i.result.kept, settings, run_id)
    stage_iii = per_shard(check_with_oracle, stage_ii.result.kept, settings, run_id)

    draft = deflection_draft(
        settings, version or cfg.version, run_id, gating=stage_i, pairing=stage_ii, oracle=stage_iii,
        ingested={r.source: r.samples if n is None else min(r.samples, n) for r, n in zip(ingested, limits)},
        quarantine=quarantine,
        source_files=sorted({f for r in ingested for f in r.source_files}), components=stage_ii.components)
    release = publish_release(draft, settings.releases_root, settings.workdir / "images")
    print(f"deflectionbench {draft.version}: {stage_iii.result.kept.num_rows} samples -> {release}")
    return str(release)


if __name__ == "__main__":
    deflectionbench()
