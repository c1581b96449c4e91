"""``mmcurate`` command line. Each command group lives in its own module.

User errors (``MmcurateError``) print as one line on stderr and exit 2.
"""
from __future__ import annotations

import sys

from mmcurate.core.errors import MmcurateError

from .app import app
from . import ingest  # noqa: F401  (registers commands)


def main() -> None:
    try:
        app(standalone_mode=False)
    except MmcurateError as exc:
        print(f"mmcurate: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except SystemExit:
        raise
    except Exception as exc:  # click usage errors arrive here in non-standalone mode
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        if isinstance(exc, click.exceptions.Abort):
            print("Aborted.", file=sys.stderr)
            sys.exit(1)
        raise
