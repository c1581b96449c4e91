"""One helper writes every count in cards and reports ("1 sample", "2 samples") and one caps every
long list in errors ("and 9,990 more")."""
from __future__ import annotations

import pytest

from mmcurate.core.config import ConfigError, Settings
from mmcurate.core.plural import counted, listed


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


def test_listed_caps_a_long_list_in_one_line():
    """Issue 31 item 10: one helper caps every list an error prints."""
    assert listed(["a", "b"]) == "a, b"
    assert listed(range(10_000)) == "0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 9,990 more"
    assert listed("abcd", 2, "; ") == "a; b and 2 more"


def test_an_unknown_model_among_many_is_one_short_line(tmp_path):
    settings = Settings(workdir=tmp_path, models={f"m{i}": {"name": f"m{i}", "backend": "embedded"} for i in range(10_000)})
    with pytest.raises(ConfigError) as refused:
        settings.add_model("nobody")
    assert len(str(refused.value)) < 200 and "and 9,990 more" in str(refused.value)
