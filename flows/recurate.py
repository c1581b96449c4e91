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
from mmcurate.core.config import Settings, load_config
from mmcurate.core.ids import new_run_id
from mmcurate.core.images import ImageStore
from mmcurate.gating.parametric import ParametricGate
from mmcurate.releases.deflection import deflection_draft
from mmcurate.releases.diff import diff_releases
from mmcurate.releases.topics import inherited_topics
from mmcurate.releases.reader import open_release
from mmcurate.releases.rerun import refuse_changed_version
from mmcurate.releases.unembed import canonical_samples
from mmcurate.releases.versions import next_minor
from mmcurate.tasks.release import publish_release
from mmcurate.tasks.stages import run_stage


@flow(name="recurate", log_prints=True)
def recurate(release: str, add_model: list[str], config: str | None = None, version: str | None = None,
             allow_incomplete: bool = False) -> str:
    parent = open_release(release)
    if config:
        settings = load_config(config)
    else:  # the release's own resolved config, its paths relative to the release, written beside it
        settings = Settings.from_resolved(parent.manifest["config"], parent.path)
        settings.releases_root = parent.path.resolve().parent.parent
    cfg = settings.section("deflectionbench")
    new = [settings.add_model(spec).name for spec in add_model]
    cfg.gating.pool = [*cfg.gating.pool, *(m for m in new if m not in cfg.gating.pool)]
    version = version or next_minor(parent.version)
    refuse_changed_version(settings, "deflectionbench", version)  # before any work
    run_id = new_run_id()
    samples = canonical_samples(parent, ImageStore(settings.workdir / "images"))

    gated = run_stage(ParametricGate(cfg.gating), samples, settings, run_id)                    # Stage I
    oracle = OracleCheck(cfg.gating.pool, cfg.k_min, cfg.gating.oracle_rule)
    checked = run_stage(oracle, gated.kept, settings, run_id)  # Stage III

    draft = deflection_draft(
        settings, version, run_id, gating=gated, pairing=None, oracle=checked,
        ingested=dict(Counter(samples["source"].to_pylist())),
        quarantine=parent.quarantine, source_files=parent.manifest.get("source_files", []),
        components=parent.manifest.get("components", {}), parent=parent.version, history=parent.ledger,
        topics_before=inherited_topics(parent.manifest), indexes=parent.manifest.get("indexes"))  # contexts as mined then
    draft.removed = diff_releases(parent, draft).removed_records()
    path = publish_release(draft, settings.releases_root, settings.workdir / "images", allow_incomplete)
    print(f"recurated {parent.version} -> {draft.version} with {new}: "
          f"{len(draft.removed)} removed, {draft.tables['test'].num_rows} kept -> {path}")
    return str(path)
