"""``mmcurate`` command line. Each command group lives in its own module.

User errors (``MmcurateError``) print as one line on stderr and exit 2; usage errors and
exit codes are Click's. Commands import flows and heavy libraries (Prefect, torch, Great
Expectations) inside their functions, so that ``mmcurate --help`` and a usage error answer
at once instead of after seconds of imports.
"""

from __future__ import annotations

import sys

from mmcurate.core.errors import MmcurateError

from . import annotate, cache, compare, export, ingest, judge, plan, releases, run, watch  # noqa: F401  (register commands)
from .app import app


def main() -> None:
    try:
        app()
    except MmcurateError as exc:
        print(f"mmcurate: error: {exc}", file=sys.stderr)
        sys.exit(2)
