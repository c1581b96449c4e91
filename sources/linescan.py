"""Which line picker the Reddit reader runs: the C pass ``_linescan`` when the install built
it, else ``linescan_py``, the same functions in pure Python (same answers, byte for byte;
slower). ``MMCURATE_PURE_PICKER=1`` chooses the pure one even where the C pass is built.

``setup.py`` builds the extension as optional: an install without a C compiler still
succeeds, and this picks the pure path. The ingest records which one ran
(``ingest.json`` ``reader.line_picker``: ``c`` or ``python``).

Hand-written on purpose: a JSON library (orjson, simdjson) must parse a line to look at it,
and a pushshift month is tens of millions of lines of which well under 1% are parsed; the C
pass decides each line from its raw bytes while they are in the cache. Measured with
``bench/ingest_reddit.py`` (docs/figures.md): ingest / raw decompression 0.25-0.31 with
the C picker against 0.09-0.15 with the same picker in Python, outputs byte-identical.
"""

from __future__ import annotations

import os
from importlib import import_module
from types import ModuleType

PURE_ENV = "MMCURATE_PURE_PICKER"


def line_scanner() -> tuple[str, ModuleType]:
    """``("c", _linescan)`` or ``("python", linescan_py)``, asked afresh at each call."""
    if os.environ.get(PURE_ENV, "").strip() in ("", "0"):
        try:
            return "c", import_module(f"{__package__}._linescan")
        except ImportError:  # not built: no compiler at install time
            pass
    return "python", import_module(f"{__package__}.linescan_py")
