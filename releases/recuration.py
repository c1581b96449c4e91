"""The settings a re-curation runs with.

A re-curation gates a published release again with its pool plus new models. Without a
config it uses the release's own resolved config, whose paths the manifest records relative
to the release folder, and publishes beside the release; with one it uses that config's
paths. The new models join the gating pool after the ones the release was made with.
"""
from __future__ import annotations

from pathlib import Path

from mmcurate.core.config import Settings, load_config

from .reader import Release


def recuration_settings(parent: Release, config: Path | str | None, add_models: list[str]) -> tuple[Settings, list[str]]:
    """The settings of re-curating ``parent`` with ``add_models`` (names or model files), and
    the names of the models that were added."""
    if config:
        settings = load_config(config)
    else:
        settings = Settings.from_resolved(parent.manifest["config"], parent.path)
        settings.releases_root = parent.path.resolve().parent.parent
    gating = settings.section(parent.benchmark).gating
    new = [settings.add_model(spec).name for spec in add_models]
    gating.pool = [*gating.pool, *(name for name in new if name not in gating.pool)]
    return settings, new
