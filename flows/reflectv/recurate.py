"""ReflectV re-curation: new teachers and verifiers check the released trajectories again, at
the cost of their calls only.

    roles      the re-checking teachers and verifiers (--add-model teacher=M, verifier=M); the
               original teacher and verifier are not asked again
    recheck    teachers score the released dialogues (the trajectory rules must hold);
               verifiers look at every marked turn (a no collapses the chain); rho again
    near-dups  and draft, as every re-curation (``tasks.recuration``)
"""

from __future__ import annotations

from mmcurate.annotation.reflectv.recheck import SCORES, RecheckTrajectories, drawn_marks
from mmcurate.annotation.reflectv.visual import YES_NO
from mmcurate.benchmarks import register_part
from mmcurate.core.plural import counted
from mmcurate.releases.recuration import Recuration
from mmcurate.releases.reflectv.draft import reflectv_recuration_draft, released_dialogues, trajectory_samples
from mmcurate.tasks.recuration import Recurated, recheck_near_duplicates
from mmcurate.tasks.stages import run_stage


@register_part("reflectv", "recurate")
def recurate_reflectv(run: Recuration) -> Recurated:
    parent, settings, cfg, run_id = run.parent, run.settings, run.section, run.run_id
    store = run.images

    recheck = RecheckTrajectories(
        cfg.recheck_teachers,
        cfg.recheck_verifiers,
        released_dialogues(parent),
        drawn_marks(parent.ledger),
        cfg.rho,
        cfg.seed,
        run.recorded("recheck", (*SCORES, *YES_NO)),
        cfg.rho_rule,
    )
    checked = run_stage(recheck, trajectory_samples(parent, store), settings, run_id)
    deduped = recheck_near_duplicates(run, checked.kept)

    draft = reflectv_recuration_draft(settings, run.version, run_id, parent, run.parent_record, checked, deduped, store)
    return Recurated(
        draft, checked.calls, checked.kept.num_rows, (f"{counted(checked.counts['collapsed'], 'chain')} collapsed",)
    )
