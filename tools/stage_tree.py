"""Lay the package out as it is installed, ``DEST/mmcurate/<package>/...``, from the folders
pyproject.toml maps (``[tool.setuptools.package-dir]``: ``core/`` is ``mmcurate.core``).

Tools that find modules by walking the folder of the top package, as import-linter (grimp)
and ``farm-studio look`` do, see only ``mmcurate/`` in a checkout; they read this copy
instead. Every subfolder comes along, so a package missing from the ``packages`` list is
still seen. Usage: ``python tools/stage_tree.py DEST`` (DEST is emptied first)."""

from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def stage(dest: Path) -> Path:
    """Copy every mapped folder under ``dest``; return ``dest``."""
    mapping = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    shutil.rmtree(dest, ignore_errors=True)
    for package, folder in sorted(mapping.items()):  # "mmcurate" before "mmcurate.core"
        shutil.copytree(
            REPO / folder,
            dest.joinpath(*package.split(".")),
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__", "*.so"),
        )
    return dest


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/stage_tree.py DEST")
    print(stage(Path(sys.argv[1]).resolve()))
