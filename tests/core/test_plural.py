"""One helper writes every count in cards and reports ("1 sample", "2 samples") and one caps every
long list in errors ("and 9,990 more")."""

from __future__ import annotations

import pytest

from mmcurate.core.config import ConfigError, Settings
from mmcurate.core.plural import counted, listed


@pytest.mark.parametrize(
    "n, noun, plural, text",
    [
        (0, "sample", None, "0 samples"),
        (1, "sample", None, "1 sample"),
        (2, "sample", None, "2 samples"),
        (1, "QA pair", None, "1 QA pair"),
        (3, "chain", None, "3 chains"),
        (1, "query", "queries", "1 query"),
        (2, "query", "queries", "2 queries"),
    ],
)
def test_counted(n, noun, plural, text):
    assert counted(n, noun, plural) == text


def test_listed_caps_a_long_list_in_one_line():
    """Issue 31 item 10: one helper caps every list an error prints."""
    assert listed(["a", "b"]) == "a, b"
    assert listed(range(10_000)) == "0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 9,990 more"
    assert listed("abcd", 2, "; ") == "a; b and 2 more"


def test_an_unknown_model_among_many_is_one_short_line(tmp_path):
    settings = Settings(
        workdir=tmp_path, models={f"m{i}": {"name": f"m{i}", "backend": "embedded"} for i in range(10_000)}
    )
    with pytest.raises(ConfigError) as refused:
        settings.add_model("nobody")
    assert len(str(refused.value)) < 200 and "and 9,990 more" in str(refused.value)


# ---------------------------------------------------------------------------- issue 31 item 20: each message
def test_ingest_summary_says_one_sample_and_lists_no_zero_skip(tmp_path) -> None:
    from mmcurate.sources.ingest import IngestResult

    line = IngestResult("reddit", tmp_path, 1, 0, [], {"no_image": 0, "survey": 2}).summary()
    assert f"reddit: 1 sample -> {tmp_path}" in line and "1 samples" not in line
    assert "skipped: 2 (survey)" in line and "0 (no_image)" not in line
    assert "skipped" not in IngestResult("reddit", tmp_path, 2, 0, [], {"no_image": 0}).summary()


def test_kestrel_counts_one_instance() -> None:
    from mmcurate.core.plural import counted as said

    assert said(1, "instance") == "1 instance"  # Kestrel's evidence text (tests/evaluation/test_kestrel.py)


def test_a_failed_calls_line_counts_in_agreement() -> None:
    from mmcurate.models.accounting import failed_calls

    assert "failed 1 of 1 call" in failed_calls("m", 1, 1, None) and "1 calls" not in failed_calls("m", 1, 1, None)


def test_the_plan_groups_thousands_and_agrees() -> None:
    assert (
        counted(12000, "sample", grouped=True) == "12,000 samples" and counted(1, "sample", grouped=True) == "1 sample"
    )


def test_no_message_in_the_tree_writes_a_plural_with_parentheses() -> None:
    """No "(s)" in a message of the project (model prompts that quote a rubric aside): a count
    says its noun through core.plural.counted."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    prompts = {"judging/simpleqa.py", "evaluation/crag.py"}  # the SimpleQA / CRAG rubric text sent to judges
    found = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        if rel.split("/")[0] in {"tests", ".venv", "bench", "build"} or rel in prompts:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"""f["'].*\w\(s\)""", line):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert found == []


def test_no_message_puts_a_row_count_before_a_plural_noun() -> None:
    """ "1 turns" (CRAG-MM's run and evaluation lines), "1 samples": a count of rows or of a list
    is written with core.plural.counted, never before a fixed plural."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    pattern = re.compile(
        r"\{[^{}]*(num_rows|len\(|height)[^{}]*\} (turns|samples|models|rows|items|probes|calls"
        r"|questions|files|chains|pairs|dialogues|instances|documents|answers)\b"
    )
    found = [
        f"{path.relative_to(root)}:{n}"
        for path in root.rglob("*.py")
        if path.relative_to(root).parts[0] not in {"tests", ".venv", "bench"}
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []
