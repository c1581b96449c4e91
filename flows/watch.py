"""Watching for new models: propose them, and (``run``) re-curate, verify and publish.

    propose    the catalog's models the release was not curated with (``planning.watch``),
               and the plan of re-curating with them (calls, tokens, GPU-hours, cost)
    run        the release's re-curation flow with those models, refused over the budget
               before any call
    verify     the new version's checksums and counts; only a verified release goes on
    publish    to ``target_dir`` (a local copy of exactly what would be uploaded) or the
               Hub (``repo_id``), when one is given
    report     the outcome as a Prefect markdown artifact, and through the notification block
               named by ``notify_block`` or the config's ``notify_block``, success or failure

Deployed on a schedule (prefect.yaml, ``watch/watch``), it keeps a benchmark current
without anyone editing model names: the maintainers edit the catalog in git.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from prefect import flow

from mmcurate.core.errors import MmcurateError
from mmcurate.core.plural import counted, listed
from mmcurate.flows.recurate import recurate_release
from mmcurate.planning.watch import propose
from mmcurate.releases.errors import ReleaseError
from mmcurate.releases.publish import publish
from mmcurate.releases.verify import verify_release
from mmcurate.tasks.notify import report_outcome


@flow(name="watch", log_prints=True)
def watch(
    release: str,
    catalog: str,
    config: str | None = None,
    run: bool = False,
    max_calls: int | None = None,
    max_cost: float | None = None,
    target_dir: str | None = None,
    repo_id: str | None = None,
    notify_block: str | None = None,
) -> dict[str, Any]:
    outcome: dict[str, Any] = {
        "release": release,
        "catalog": catalog,
        "new_models": [],
        "recurated": None,
        "published": None,
    }
    block = notify_block
    with tempfile.TemporaryDirectory(prefix="mmcurate-watch-") as specs:
        try:
            proposal = propose(release, catalog, config, Path(specs))
            block = notify_block or (proposal.run.settings.notify_block if proposal.run else None)
            print(proposal.render(hint=not run))  # a run needs no hint to run it
            outcome["new_models"] = [m.spec.name for m in proposal.new]
            if run and proposal.run is not None:
                path = recurate_release(
                    release=release,
                    add_model=proposal.add_models,
                    config=config,
                    max_calls=max_calls,
                    max_cost=max_cost,
                )
                outcome["recurated"] = path
                verified = verify_release(path)
                if not verified.ok:
                    raise ReleaseError(
                        f"{path} does not verify, not published: {listed(verified.problems(), sep='; ')}"
                    )
                if target_dir or repo_id:
                    benchmark = proposal.release.benchmark
                    outcome["published"] = publish(
                        path, repo_id or f"local/{benchmark}", Path(target_dir) if target_dir else None
                    )
        except MmcurateError as exc:
            report_outcome(_key(release), f"watch {release}: failed", _markdown(outcome, str(exc)), block)
            raise
        report_outcome(_key(release), f"watch {release}: {_summary(outcome)}", _markdown(outcome), block)
    return outcome


def _key(release: str) -> str:
    parts = Path(release).parts[-2:]
    return "watch-" + "-".join("".join(c if c.isalnum() else "-" for c in p.lower()) for p in parts)


def _summary(outcome: dict[str, Any]) -> str:
    if not outcome["new_models"]:
        return "no new model"
    if outcome["recurated"] is None:
        return f"{counted(len(outcome['new_models']), 'new model')} proposed"
    return f"re-curated as {outcome['recurated']}" + (
        f", published to {outcome['published']}" if outcome["published"] else ""
    )


def _markdown(outcome: dict[str, Any], error: str | None = None) -> str:
    lines = [
        f"# Watch of `{outcome['release']}`",
        "",
        f"Catalog: `{outcome['catalog']}`",
        "",
        f"New models: {', '.join(f'`{m}`' for m in outcome['new_models']) or 'none'}",
        "",
    ]
    if outcome["recurated"]:
        lines += [f"Re-curated and verified: `{outcome['recurated']}`", ""]
    if outcome["published"]:
        lines += [f"Published: `{outcome['published']}`", ""]
    if error:
        lines += [f"**Failed**: {error}", ""]
    return "\n".join(lines)
