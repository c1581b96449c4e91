"""``mmcurate`` command line. Each command group lives in its own module.

User errors (``MmcurateError``) print as one line on stderr and exit 2; usage errors and
exit codes are Click's.
"""
from __future__ import annotations

import sys

from mmcurate.core.errors import MmcurateError

from .app import app
from . import annotate, ingest, judge, plan, releases, run  # noqa: F401  (register commands)


def main() -> None:
    try:
        app()
    except MmcurateError as exc:
        print(f"mmcurate: error: {exc}", file=sys.stderr)
        sys.exit(2)
