"""One helper writes every count in cards and reports: "1 sample", "2 samples"."""
from __future__ import annotations

import pytest

from mmcurate.core.plural import counted


@pytest.mark.parametrize("n, noun, plural, text", [
    (0, "sample", None, "0 samples"),
    (1, "sample", None, "1 sample"),
    (2, "sample", None, "2 samples"),
    (1, "QA pair", None, "1 QA pair"),
    (3, "chain", None, "3 chains"),
    (1, "query", "queries", "1 query"),
    (2, "query", "queries", "2 queries"),
])
def test_counted(n, noun, plural, text):
    assert counted(n, noun, plural) == text
