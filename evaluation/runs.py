"""Where an evaluation run writes, for every benchmark."""
from __future__ import annotations

from pathlib import Path

from mmcurate.core.config import Settings
from mmcurate.releases.reader import Release


def evaluation_folder(settings: Settings, release: Release, run_name: str, out: str | Path | None) -> Path:
    """``out``, or ``<workdir>/evaluations/<benchmark>-<version>/<run_name>``: one folder per
    model and answering system, so runs never overwrite each other."""
    if out:
        return Path(out)
    return settings.workdir / "evaluations" / f"{release.benchmark}-{release.version}" / run_name
