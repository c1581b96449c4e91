"""What every re-curation shares: open the release with the new models and plan their calls
before any model is asked; its last stage, near-duplicates within the release and against the
earlier versions beside it (``recheck_near_duplicates``); publish the next version with what
changed and report what the run spent beside the plan."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from mmcurate.core.stages import StageResult
from mmcurate.core.tables import SpilledTable
from mmcurate.planning.plan import Plan
from mmcurate.planning.recuration import Budget
from mmcurate.releases.draft import ReleaseDraft
from mmcurate.releases.near_duplicates import near_duplicate_stage
from mmcurate.releases.recuration import Recuration, begin_recuration, describe_changes
from mmcurate.tasks.plan import plan_recuration, report_spent
from mmcurate.tasks.release import publish_release
from mmcurate.tasks.stages import run_stage


@dataclass(frozen=True)
class Recurated:
    """What a benchmark's re-curation steps return to the re-curation flow: the next version's
    draft, the calls the added models made, how many samples it keeps and what else changed
    (``3 with other citations``), for the flow's last line."""

    draft: ReleaseDraft
    calls: list[dict]
    kept: int
    changed: tuple[str, ...] = ()

    def summary(self) -> str:
        """``N removed, <changed>, M kept``; the removals are known once the draft is published."""
        return ", ".join([f"{len(self.draft.removed)} removed", *self.changed, f"{self.kept} kept"])


def open_recuration(
    release: str,
    config: str | None,
    add_model: list[str],
    version: str | None,
    max_calls: int | None,
    max_cost: float | None,
) -> tuple[Recuration, Plan]:
    """The re-curation of ``release`` with ``add_model`` (checked before any work) and the
    bill of the added models (refused over the budget before any model call)."""
    run = begin_recuration(release, config, add_model, version)
    return run, plan_recuration(run, Budget(max_calls, max_cost))


def recheck_near_duplicates(run: Recuration, kept: pa.Table | SpilledTable) -> StageResult:
    """The near-duplicate stage on what a re-curation kept: within the release, against earlier
    versions (the parent, beside it in the run's folder) and the releases the config names."""
    near = near_duplicate_stage(run.settings, run.parent.benchmark, run.version, run.folder)
    return run_stage(near, kept, run.settings, run.run_id)


def publish_recuration(
    run: Recuration, draft: ReleaseDraft, allow_incomplete: bool, bill: Plan, calls: list[dict]
) -> Path:
    """Publish ``draft`` as the next version with its removals and changes described
    (CHANGELOG.md), then the plan beside the ``calls`` the run made."""
    path = publish_release(
        describe_changes(run, draft),
        run.settings.mirror("releases_root"),
        run.settings.image_store(),
        allow_incomplete,
        folder=run.folder,
    )
    report_spent(bill, calls)
    return path
