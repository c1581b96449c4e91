"""Publishing tasks: write the release draft (validated) and report it, or return the release
it reruns."""

from __future__ import annotations

import json
from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from mmcurate.core.images import ImageStore
from mmcurate.core.storage import Mirror
from mmcurate.releases.card import banners
from mmcurate.releases.completeness import check_complete
from mmcurate.releases.draft import ReleaseDraft
from mmcurate.releases.manifest import MANIFEST
from mmcurate.releases.rerun import published_rerun
from mmcurate.releases.writer import write_release


@task(name="publish-release", cache_policy=NO_CACHE)
def publish_release(
    draft: ReleaseDraft,
    releases: Mirror,
    images: ImageStore,
    allow_incomplete: bool = False,
    folder: Path | None = None,
) -> Path:
    """Write the release (into ``folder`` when the benchmark's versions are not under
    ``releases_root/<benchmark>``: a re-curation's, beside its parent); the writer validates it
    and refuses to publish a failing one, and a releases root in an object store gets it by the
    marker rule (``releases.local`` is then this worker's copy). A run whose failures held
    samples out is refused unless ``allow_incomplete`` (completeness.py); a rerun of a
    published release returns it (``releases.rerun.published_rerun``)."""
    check_complete(draft, allow_incomplete)
    releases.pull(f"{draft.benchmark}/{draft.version}")
    existing = published_rerun(draft, releases.local, folder)
    if existing is not None:
        get_run_logger().info(f"{draft.benchmark} {draft.version} exists with identical content: unchanged")
        _share(existing, releases)  # a push a crash interrupted
        return existing
    for name, rows in draft.statistics.items():
        if rows:
            create_table_artifact(
                key=f"{draft.benchmark}-{name.replace('_', '-')}",
                table=rows,
                description=f"{draft.benchmark} {draft.version}: {name}",
            )
    path = write_release(draft, releases.local, images, folder=folder)
    _share(path, releases)
    create_markdown_artifact(key=f"{draft.benchmark}-release", markdown=release_summary(path, draft.notes))
    return path


def _share(path: Path, releases: Mirror) -> None:
    """Publish the release at ``path`` to the object store behind ``releases`` (if any)."""
    if releases.remote is not None and path.is_relative_to(releases.local):
        relative = path.relative_to(releases.local).as_posix()
        releases.push(relative)
        get_run_logger().info(f"published to {releases.remote / relative}")


def release_summary(path: Path, notes: list[str]) -> str:
    """The run's release artifact: the card's warnings first (scripted models, an incomplete
    release), then where it was written and its notes."""
    manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    warnings = "".join(f"{banner}\n\n" for banner in banners(manifest))
    return f"# {manifest['benchmark']} {manifest['version']}\n\n{warnings}Written to `{path}`.\n\n" + "\n".join(
        f"- {note}" for note in notes
    )
