"""compare-evals matches the evaluated release by content, not only by name (issue 22, item 11)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mmcurate.evaluation.compare import CompareError, compare_runs
from mmcurate.evaluation.run_record import record_release

GRADES = {("s1", "oracle", 0): "CORRECT", ("s2", "oracle", 0): "INCORRECT"}


def run(folder: Path, content_id: str | None) -> Path:
    folder.mkdir(parents=True)
    rows = [
        {"sample_id": sid, "scenario": scenario, "n_negatives": n, "grade": grade}
        for (sid, scenario, n), grade in GRADES.items()
    ]
    pq.write_table(pa.Table.from_pylist(rows), folder / "answers.parquet")
    (folder / "table.md").write_text("# m on deflectionbench 1.0.0 (moderate abstention)\n")
    if content_id is not None:
        record_release(folder, "deflectionbench", "1.0.0", content_id)
    return folder


def test_two_releases_that_share_a_name_are_not_compared(tmp_path):
    a, b = run(tmp_path / "a", "a" * 64), run(tmp_path / "b", "b" * 64)
    with pytest.raises(CompareError, match="two different releases named deflectionbench 1.0.0: content aaaaaaaaaaaa"):
        compare_runs(a, b)
    same = run(tmp_path / "c", "a" * 64)
    assert compare_runs(a, same).compared == 2
    older = run(tmp_path / "d", None)  # a run written before runs recorded the content: matched by name
    assert compare_runs(a, older).compared == 2
