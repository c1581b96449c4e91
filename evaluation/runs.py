"""Where an evaluation run writes, for every benchmark."""
from __future__ import annotations

from pathlib import Path

from mmcurate.core.config import Settings

PLAIN = "plain"  # the model answering alone; any other system's runs carry its name


def evaluation_folder(settings: Settings, benchmark: str, version: str, model: str, out: str | Path | None,
                      system: str = PLAIN) -> Path:
    """``out``, or ``<workdir>/evaluations/<benchmark>-<version>/<model>[-<system>]``: one folder
    per model and answering system, so runs never overwrite each other."""
    if out:
        return Path(out)
    run = model if system == PLAIN else f"{model}-{system}"
    return settings.workdir / "evaluations" / f"{benchmark}-{version}" / run
