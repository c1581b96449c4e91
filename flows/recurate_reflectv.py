"""ReflectV re-curation: new teachers and verifiers check the released trajectories again, at
the cost of their calls only.

    open       the release, the re-checking teachers and verifiers (--add-model teacher=M,
               verifier=M); the original teacher and verifier are not asked again
    plan       the new models' calls, refused over --max-calls / --max-cost
    recheck    teachers score the released dialogues (the trajectory rules must hold);
               verifiers look at every marked turn (a no collapses the chain); rho again
    near-dups  within the release, against earlier versions (the parent) and named releases
    publish    the next minor version beside the release, with removal stamps and CHANGELOG.md
"""
from __future__ import annotations

from prefect import flow

from mmcurate.annotation.reflectv.recheck import SCORES, RecheckTrajectories, drawn_marks
from mmcurate.annotation.reflectv.visual import YES_NO
from mmcurate.core.images import ImageStore
from mmcurate.core.plural import counted
from mmcurate.releases.near_duplicates import near_duplicate_stage
from mmcurate.releases.reflectv import reflectv_recuration_draft, released_dialogues, trajectory_samples
from mmcurate.tasks.recuration import open_recuration, publish_recuration
from mmcurate.tasks.stages import run_stage


@flow(name="recurate-reflectv", log_prints=True)
def recurate_reflectv(release: str, add_model: list[str], config: str | None = None, version: str | None = None,
                      allow_incomplete: bool = False, max_calls: int | None = None,
                      max_cost: float | None = None) -> str:
    run, bill = open_recuration(release, config, add_model, version, max_calls, max_cost)   # before any model call
    parent, settings, cfg, run_id = run.parent, run.settings, run.section, run.run_id
    store = ImageStore(settings.workdir / "images")

    recheck = RecheckTrajectories(cfg.recheck_teachers, cfg.recheck_verifiers, released_dialogues(parent),
                                  drawn_marks(parent.ledger), cfg.rho, cfg.seed,
                                  run.recorded("recheck", (*SCORES, *YES_NO)), cfg.rho_rule)
    checked = run_stage(recheck, trajectory_samples(parent, store), settings, run_id)
    deduped = run_stage(near_duplicate_stage(settings, parent.benchmark, run.version), checked.kept, settings, run_id)

    draft = reflectv_recuration_draft(settings, run.version, run_id, parent, run.parent_record, checked, deduped, store)
    path = publish_recuration(run, draft, allow_incomplete, bill, checked.calls)
    print(f"recurated reflectv {parent.version} -> {draft.version} with {', '.join(run.new_models)}: "
          f"{len(draft.removed)} removed, {counted(checked.counts['collapsed'], 'chain')} collapsed, "
          f"{checked.kept.num_rows} kept -> {path}")
    return str(path)
