"""A spilled table (issue 36 item 2): Parquet parts read back a shard or a batch at a time, the
same rows in the same order as the table they were cut from, whatever the part boundaries."""

from __future__ import annotations

import pyarrow as pa

from mmcurate.core.tables import SpilledTable, spill_chunks, table_batches, table_chunks

SCHEMA = pa.schema(
    [pa.field("sample_id", pa.string()), pa.field("n", pa.int64()), pa.field("tags", pa.list_(pa.string()))]
)


def _table(start: int, stop: int) -> pa.Table:
    return pa.table(
        {
            "sample_id": [f"s{i}" for i in range(start, stop)],
            "n": list(range(start, stop)),
            "tags": [[f"t{i}"] * (i % 3) for i in range(start, stop)],
        },
        schema=SCHEMA,
    )


def test_chunks_cross_part_boundaries_and_keep_the_order(tmp_path):
    whole = _table(0, 23)
    spilled = spill_chunks([_table(0, 5), _table(5, 6), _table(6, 23)], tmp_path, "part", SCHEMA)
    assert [p.name for p in spilled.parts] == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    assert spilled.num_rows == 23
    chunks = list(spilled.chunks(7))
    assert [c.num_rows for c in chunks] == [7, 7, 7, 2]
    assert pa.concat_tables(chunks).equals(whole)
    assert [c.to_pylist() for c in chunks] == [c.to_pylist() for c in table_chunks(whole, 7)]
    assert spilled["sample_id"].to_pylist() == whole["sample_id"].to_pylist()
    assert pa.Table.from_batches(list(table_batches(spilled, ["n"], 4))).column("n").to_pylist() == list(range(23))


def test_an_empty_spilled_table_still_gives_one_empty_chunk(tmp_path):
    empty = spill_chunks([SCHEMA.empty_table()], tmp_path, "none", SCHEMA)
    (chunk,) = list(empty.chunks(4))
    assert chunk.num_rows == 0 and chunk.schema == SCHEMA and empty.num_rows == 0
    assert [c.num_rows for c in table_chunks(SCHEMA.empty_table(), 4)] == [0]
    assert isinstance(empty, SpilledTable)
