"""Re-curation when stronger models appear: the next minor version at the cost of the new
models' calls only.

    read       the release's samples (contexts as released) and its resolved config
    Stage I    gate them with the pool plus the new models: earlier answers are cache hits
    Stage III  re-run the quality checks with the new models on what is kept
    publish    the next minor version beside the release (or under the releases_root of
               ``config``); every removal carries its reason and removed_in
"""
from __future__ import annotations

from collections import Counter

from prefect import flow

from mmcurate.annotation.deflectionbench.oracle import OracleCheck
from mmcurate.core.ids import new_run_id
from mmcurate.core.images import ImageStore
from mmcurate.gating.parametric import ParametricGate
from mmcurate.gating.prompts import prompt_set
from mmcurate.releases.deflection import deflection_draft
from mmcurate.releases.diff import diff_releases
from mmcurate.releases.topics import inherited_topics
from mmcurate.releases.reader import open_release
from mmcurate.releases.recuration import recuration_settings
from mmcurate.releases.rerun import refuse_changed_version
from mmcurate.releases.unembed import canonical_samples
from mmcurate.releases.versions import next_minor
from mmcurate.tasks.release import publish_release
from mmcurate.tasks.stages import run_stage


@flow(name="recurate", log_prints=True)
def recurate(release: str, add_model: list[str], config: str | None = None, version: str | None = None,
             allow_incomplete: bool = False) -> str:
    parent = open_release(release)
    settings, new = recuration_settings(parent, config, add_model)
    cfg = settings.section(parent.benchmark)
    version = version or next_minor(parent.version)
    refuse_changed_version(settings, parent.benchmark, version)  # before any work
    run_id = new_run_id()
    samples = canonical_samples(parent, ImageStore(settings.workdir / "images"))

    templates = prompt_set(cfg.prompts)
    gated = run_stage(ParametricGate(cfg.gating, templates), samples, settings, run_id)         # Stage I
    oracle = OracleCheck(cfg.gating.pool, cfg.k_min, cfg.gating.oracle_rule, cfg.gating.force_guess, templates)
    checked = run_stage(oracle, gated.kept, settings, run_id)  # Stage III

    draft = deflection_draft(
        settings, version, run_id, gating=gated, pairing=None, oracle=checked,
        ingested=dict(Counter(samples["source"].to_pylist())),
        quarantine=parent.quarantine, source_files=parent.manifest.get("source_files", []),
        components=parent.manifest.get("components", {}), parent=parent.version, history=parent.ledger,
        topics_before=inherited_topics(parent.manifest))
    draft.removed = diff_releases(parent, draft).removed_records()
    path = publish_release(draft, settings.releases_root, settings.workdir / "images", allow_incomplete)
    print(f"recurated {parent.version} -> {draft.version} with {new}: "
          f"{len(draft.removed)} removed, {draft.tables['test'].num_rows} kept -> {path}")
    return str(path)
