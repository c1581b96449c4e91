"""DeflectionBench re-curation when stronger models appear: the next minor version at the cost
of the new models' calls only.

    open       the release (the parent), its config or another, the new gating models; the
               parent's ledger holds every original model's answers (Stage I, the gold
               and distractor checks), which decide for those models: they are not asked
               again, with or without the response cache
    plan       the new models' calls, refused over --max-calls / --max-cost
    Stage I    gate the released samples with the pool plus the new models
    Stage III  the gold and distractor checks with the new models on what is kept
    near-dups  within the release, against earlier versions (the parent) and named releases
    publish    the next minor version beside the release: removal stamps, CHANGELOG.md,
               the parent recorded by version and content id

``recurate_release`` is the entry point for deployments and the command line: it runs the
re-curation flow of the release's benchmark (``Benchmark.recurate`` in the registry).
"""
from __future__ import annotations

from collections import Counter

from prefect import flow

from mmcurate.annotation.deflectionbench.oracle import OracleCheck
from mmcurate.benchmarks import get
from mmcurate.core.images import ImageStore
from mmcurate.gating.parametric import ParametricGate
from mmcurate.gating.prompts import prompt_set
from mmcurate.planning.recuration import GRADES
from mmcurate.releases.deflection import deflection_draft, inherited_ingest
from mmcurate.releases.near_duplicates import near_duplicate_stage
from mmcurate.releases.reader import open_release
from mmcurate.releases.topics import inherited_topics
from mmcurate.releases.unembed import canonical_samples
from mmcurate.tasks.recuration import open_recuration, publish_recuration
from mmcurate.tasks.stages import run_stage


@flow(name="recurate", log_prints=True)
def recurate(release: str, add_model: list[str], config: str | None = None, version: str | None = None,
             allow_incomplete: bool = False, max_calls: int | None = None, max_cost: float | None = None) -> str:
    run, bill = open_recuration(release, config, add_model, version, max_calls, max_cost)   # before any model call
    parent, settings, cfg, run_id = run.parent, run.settings, run.section, run.run_id
    samples = canonical_samples(parent, ImageStore(settings.workdir / "images"))

    templates = prompt_set(cfg.prompts)
    gated = run_stage(ParametricGate(cfg.gating, templates, recorded=run.recorded("parametric", GRADES)),
                      samples, settings, run_id)                                                # Stage I
    oracle = OracleCheck(cfg.gating.pool, cfg.k_min, cfg.gating.oracle_rule, cfg.gating.force_guess, templates,
                         recorded=run.recorded("oracle", GRADES))
    checked = run_stage(oracle, gated.kept, settings, run_id)  # Stage III
    deduped = run_stage(near_duplicate_stage(settings, parent.benchmark, run.version), checked.kept, settings, run_id)

    draft = deflection_draft(
        settings, run.version, run_id, gating=gated, pairing=None, oracle=checked,
        ingested=inherited_ingest(parent.manifest), carried=dict(Counter(samples["source"].to_pylist())),
        quarantine=parent.quarantine, source_files=parent.manifest.get("source_files", []),
        components=parent.manifest.get("components", {}), parent=run.parent_record, history=parent.ledger,
        topics=inherited_topics(parent.manifest, parent.ledger, samples), dedup=deduped,
        indexes=parent.manifest.get("indexes"))  # contexts as mined then
    path = publish_recuration(run, draft, allow_incomplete, bill, gated.calls + checked.calls)
    print(f"recurated {parent.version} -> {draft.version} with {', '.join(run.new_models)}: "
          f"{len(draft.removed)} removed, {draft.tables['test'].num_rows} kept -> {path}")
    return str(path)


@flow(name="recurate-release", log_prints=True)
def recurate_release(release: str, add_model: list[str], config: str | None = None, version: str | None = None,
                     allow_incomplete: bool = False, max_calls: int | None = None,
                     max_cost: float | None = None) -> str:
    """Re-curate ``release`` with its benchmark's re-curation flow (see the module docstring)."""
    return get(open_release(release).benchmark).flow("recurate")(
        release=release, add_model=add_model, config=config, version=version, allow_incomplete=allow_incomplete,
        max_calls=max_calls, max_cost=max_cost)
