"""An evaluation folder that several runs write (issue 31 item 2): a run adds its cells to
the folder's rows, replaces only a cell it ran again, never drops another run's rows, and
swaps the folder in whole; a folder of another model or release is refused in one line."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mmcurate.core.errors import MmcurateError
from mmcurate.evaluation.runs import merge_cells, updating

KEYS = ("setting", "n_queries")
RELEASE = ("reflvqa", "1.0.0", "c" * 64)


def rows(*cells: tuple[str, int], run: str = "r1", extra: bool = False) -> pa.Table:
    data = [{"sample_id": f"q{i}", "setting": s, "n_queries": n, "run_id": run} for s, n in cells for i in range(2)]
    table = pa.Table.from_pylist(data)
    return table.append_column("score", pa.array([1.0] * table.num_rows)) if extra else table


def cells(table: pa.Table) -> set[tuple]:
    return {(r["setting"], r["n_queries"], r["run_id"]) for r in table.to_pylist()}


def test_a_run_adds_its_cells_and_replaces_only_a_cell_it_ran_again():
    first = rows(("image", 1), ("two-step", 4))
    merged, kept, replaced = merge_cells(first, rows(("text", 1), run="r2"), KEYS)
    assert cells(merged) == {("image", 1, "r1"), ("two-step", 4, "r1"), ("text", 1, "r2")} and merged.num_rows == 6
    assert kept == [{"setting": "image", "n_queries": 1}, {"setting": "two-step", "n_queries": 4}] and replaced == []
    again, kept, replaced = merge_cells(merged, rows(("image", 1), run="r3"), KEYS)
    assert cells(again) == {("two-step", 4, "r1"), ("text", 1, "r2"), ("image", 1, "r3")} and again.num_rows == 6
    assert replaced == [{"setting": "image", "n_queries": 1}]


def test_columns_one_run_lacks_are_null_and_a_key_an_earlier_run_lacks_is_another_cell():
    merged, _, _ = merge_cells(rows(("text", 1)), rows(("image", 1), extra=True), KEYS)
    assert merged.column("score").to_pylist() == [None, None, 1.0, 1.0]  # e.g. per-answer scores added later
    older = rows(("text", 1)).drop_columns(["n_queries"])
    merged, kept, replaced = merge_cells(older, rows(("text", 1)), KEYS)
    assert merged.num_rows == 4 and replaced == [] and kept == [{"setting": "text", "n_queries": None}]


def test_the_folder_is_swapped_in_whole_with_both_runs(tmp_path):
    target = tmp_path / "evaluations" / "vlm"
    for run, cell in (("r1", ("image", 1)), ("r2", ("text", 1))):
        with updating(target, *RELEASE, "vlm") as folder:
            merged = folder.merge("answers.parquet", rows(cell, run=run), KEYS)
            pq.write_table(merged, folder.staging / "answers.parquet")
    assert cells(pq.read_table(target / "answers.parquet")) == {("image", 1, "r1"), ("text", 1, "r2")}
    assert folder.messages() == [f"{target}: keeps the earlier 1 cell setting image, n_queries 1"]
    assert folder.note() and "setting image, n_queries 1" in folder.note()
    assert sorted(p.name for p in target.parent.iterdir()) == [".vlm.lock", "vlm"]  # no staging left
    assert json.loads((target / "release.json").read_text())["model"] == "vlm"


def test_a_failed_run_leaves_the_folder_as_it_was(tmp_path):
    target = tmp_path / "vlm"
    with updating(target, *RELEASE, "vlm") as folder:
        pq.write_table(rows(("image", 1)), folder.staging / "answers.parquet")
    with pytest.raises(RuntimeError):
        with updating(target, *RELEASE, "vlm") as folder:
            (folder.staging / "answers.parquet").write_bytes(b"half")
            raise RuntimeError("the run stops mid-write")
    assert cells(pq.read_table(target / "answers.parquet")) == {("image", 1, "r1")}
    assert sorted(p.name for p in tmp_path.iterdir()) == [".vlm.lock", "vlm"]


def test_a_swap_cut_between_its_renames_is_put_back(tmp_path):
    target = tmp_path / "vlm"
    with updating(target, *RELEASE, "vlm") as folder:
        pq.write_table(rows(("image", 1)), folder.staging / "answers.parquet")
    target.rename(tmp_path / ".old-vlm-0a0b0c0d")  # where a crash between the two renames leaves it
    (tmp_path / ".tmp-vlm-0e0f0a0b").mkdir()  # and the staging folder of a run killed mid-write
    with updating(target, *RELEASE, "vlm") as folder:
        merged = folder.merge("answers.parquet", rows(("text", 1), run="r2"), KEYS)
        pq.write_table(merged, folder.staging / "answers.parquet")
    assert cells(pq.read_table(target / "answers.parquet")) == {("image", 1, "r1"), ("text", 1, "r2")}
    assert sorted(p.name for p in tmp_path.iterdir()) == [".vlm.lock", "vlm"]


def test_a_folder_of_another_model_or_release_or_not_an_evaluation_is_refused(tmp_path):
    target = tmp_path / "vlm"
    with updating(target, *RELEASE, "vlm") as folder:
        pq.write_table(rows(("image", 1)), folder.staging / "answers.parquet")
    for release, model in ((RELEASE, "other"), ((*RELEASE[:2], "d" * 64), "vlm")):
        with pytest.raises(MmcurateError) as refused:
            with updating(target, *release, model):
                pass
        assert "\n" not in str(refused.value) and "--out" in str(refused.value)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(MmcurateError, match="not an evaluation folder"):
        with updating(mine, *RELEASE, "vlm"):
            pass
    assert (mine / "notes.txt").read_text() == "keep me"


def test_a_folder_of_another_population_is_refused(tmp_path):
    """RefLVQA's subset (issue 31's leftover): a folder's runs all read the same pairs, so
    verified and all-pairs cells never share a table; a folder written before runs recorded
    their population is not refused."""
    from mmcurate.evaluation.reflvqa.subset import population

    labels = tmp_path / "human_verified.parquet"
    pq.write_table(pa.Table.from_pylist([{"sample_id": "q0", "sentence_index": 0, "human_verified": True}]), labels)
    verified = population(labels, "verified")
    assert verified.startswith("verified (labels sha256 ") and population(labels, "all") == "all"
    assert population(None, "verified") == "all"  # no labels: every pair is read (the table's note says so)
    target = tmp_path / "vlm"
    with updating(target, *RELEASE, "vlm", population="all") as folder:
        pq.write_table(rows(("image", 1)), folder.staging / "answers.parquet")
    with pytest.raises(MmcurateError, match="another population .*all -> verified") as refused:
        with updating(target, *RELEASE, "vlm", population=verified):
            pass
    assert "\n" not in str(refused.value) and "--out" in str(refused.value)
    with updating(target, *RELEASE, "vlm", population="all") as folder:
        pq.write_table(rows(("text", 1)), folder.staging / "answers.parquet")
    older = tmp_path / "older"
    with updating(older, *RELEASE, "vlm") as folder:
        pq.write_table(rows(("image", 1)), folder.staging / "answers.parquet")
    with updating(older, *RELEASE, "vlm", population=verified):
        pass
    assert json.loads((older / "release.json").read_text())["population"] == verified
