import json

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mmcurate.core.ids import sample_id
from mmcurate.core.ledger import Decision, ledger_table
from mmcurate.core.records import Context, Rejected, Sample
from mmcurate.core.schema import LEDGER, QUARANTINE, SAMPLE
from mmcurate.core.tables import AtomicParquetWriter


def _sample(i: int) -> Sample:
    return Sample(
        source="webqa",
        source_id=f"q{i}",
        question="Which city?",
        answers=["Paris"],
        gold_contexts=[Context("webqa:txt:1", "text", text="Paris is in France.", title="Paris")],
        negative_contexts=[Context("webqa:img:2", "image", image="ab" * 32)],
        meta={"split": "val"},
    )


def test_sample_ids_are_stable_and_source_scoped():
    assert sample_id("webqa", "q1") == sample_id("webqa", "q1")
    assert sample_id("webqa", "q1") != sample_id("infoseek", "q1")
    assert _sample(1).sample_id == sample_id("webqa", "q1")


def test_rows_match_the_canonical_schema():
    table = pa.Table.from_pylist([_sample(1).to_row()], schema=SAMPLE)
    row = table.to_pylist()[0]
    assert row["negative_contexts"][0]["modality"] == "image"
    assert json.loads(row["meta"]) == {"split": "val"}


def test_context_validation():
    with pytest.raises(ValueError):
        Context("x", "audio", text="?")
    with pytest.raises(ValueError):
        Context("x", "image")


def test_quarantine_raw_is_truncated():
    row = Rejected("f.jsonl:3", "malformed JSON", "x" * 5000).to_row("infoseek")
    assert len(row["raw"]) < 2100 and row["raw"].endswith("[truncated]")
    pa.Table.from_pylist([row], schema=QUARANTINE)


def test_atomic_writer_only_publishes_complete_files(tmp_path):
    path = tmp_path / "samples.parquet"
    with pytest.raises(RuntimeError):
        with AtomicParquetWriter(path, SAMPLE, batch_rows=2) as writer:
            for i in range(5):
                writer.write(_sample(i).to_row())
            raise RuntimeError("crash")
    assert not path.exists() and not list(tmp_path.iterdir())
    with AtomicParquetWriter(path, SAMPLE, batch_rows=2) as writer:
        for i in range(5):
            writer.write(_sample(i).to_row())
    assert pq.read_table(path).num_rows == 5
    assert pl.read_parquet(path)["source_id"].to_list() == [f"q{i}" for i in range(5)]


def test_ledger_rows():
    table = ledger_table(
        [Decision("s1", "parametric", "gate.answer", "INCORRECT", model="m", detail={"answer": "Lyon"})], run_id="r1"
    )
    assert table.schema == LEDGER
    assert json.loads(table.column("detail")[0].as_py()) == {"answer": "Lyon"}
