"""Table I/O: Parquet writes that only appear when complete, and JSONL objects read strictly."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import MmcurateError


class AtomicParquetWriter:
    """Write row batches to ``<path>.partial`` and rename to ``path`` on ``close()``.

    A crash leaves only the ``.partial`` file, never a truncated file under the real name.
    """

    def __init__(self, path: Path | str, schema: pa.Schema, batch_rows: int = 2048) -> None:
        self.path = Path(path)
        self.schema = schema
        self.batch_rows = batch_rows
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._partial = self.path.with_name(self.path.name + ".partial")
        self._writer = pq.ParquetWriter(self._partial, schema, compression="zstd")
        self._pending: list[Mapping[str, Any]] = []
        self.rows = 0

    def write(self, row: Mapping[str, Any]) -> None:
        self._pending.append(row)
        if len(self._pending) >= self.batch_rows:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            self._writer.write_table(pa.Table.from_pylist(self._pending, schema=self.schema))
            self.rows += len(self._pending)
            self._pending = []

    def close(self) -> Path:
        self.flush()
        self._writer.close()
        os.replace(self._partial, self.path)
        return self.path

    def abort(self) -> None:
        self._writer.close()
        self._partial.unlink(missing_ok=True)

    def __enter__(self) -> AtomicParquetWriter:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def write_table(table: pa.Table, path: Path | str) -> Path:
    """Write a whole table atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    pq.write_table(table, partial, compression="zstd")
    os.replace(partial, path)
    return path


def rows_to_table(rows: Iterable[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=schema)


def jsonl_objects(path: Path, what: str = "row") -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line of a JSONL file we do not tolerate
    errors in (a knowledge base, a labelled batch): a line that is not a JSON object, or
    bytes that are not UTF-8, raise MmcurateError naming ``file:line``. A byte-order mark
    before the first line is accepted."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError:
                raise MmcurateError(f"{path}:{number}: not UTF-8 text") from None
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise MmcurateError(f"{path}:{number}: invalid JSON: {exc.msg}") from None
            except RecursionError:
                raise MmcurateError(f"{path}:{number}: invalid JSON: nested too deeply to parse") from None
            if not isinstance(obj, dict):
                raise MmcurateError(f"{path}:{number}: a {what} must be a JSON object")
            yield number, obj


def read_table(path: Path | str, schema: pa.Schema | None = None) -> pa.Table:
    table = pq.read_table(path)
    return table.cast(schema) if schema is not None else table


SPILL_BATCH_ROWS = 4096  # rows read back at a time from a spilled table


@dataclass(frozen=True)
class SpilledTable:
    """A table held as Parquet parts on disk (a streamed stage's output, ``write_table``'s files),
    read back a batch or a shard at a time with pyarrow, never whole: what lets a curation of a
    million samples hold one shard in memory. Its rows are the parts' rows in order, cast to
    ``schema`` (pyarrow rather than polars, whose Arrow export turns strings and lists into
    their large types, which the release schema does not use)."""

    parts: tuple[Path, ...]
    schema: pa.Schema

    @property
    def num_rows(self) -> int:
        return sum(pq.ParquetFile(part).metadata.num_rows for part in self.parts)

    @property
    def column_names(self) -> list[str]:
        names: list[str] = self.schema.names
        return names

    def batches(self, columns: list[str] | None = None, batch_size: int = SPILL_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
        """Every row in order (only ``columns``, when given)."""
        schema = pa.schema([self.schema.field(c) for c in columns]) if columns else self.schema
        for part in self.parts:
            for batch in pq.ParquetFile(part).iter_batches(batch_size=batch_size, columns=schema.names):
                yield batch.select(schema.names).cast(schema)

    def chunks(self, rows: int) -> Iterator[pa.Table]:
        """Consecutive tables of ``rows`` rows (the last one shorter; one empty table when there is
        no row), across part boundaries."""
        pending: list[pa.RecordBatch] = []
        held = 0
        for batch in self.batches(batch_size=min(rows, SPILL_BATCH_ROWS)):
            pending.append(batch)
            held += batch.num_rows
            while held >= rows:
                table = pa.Table.from_batches(pending, schema=self.schema).combine_chunks()
                yield table.slice(0, rows)
                rest = table.slice(rows)
                pending, held = rest.to_batches(), rest.num_rows
        if held or not self.parts or not self.num_rows:
            yield pa.Table.from_batches(pending, schema=self.schema)

    def column(self, name: str) -> pa.ChunkedArray:
        """One column of every row, read whole (a narrow column: ids, sources)."""
        return self.select([name]).column(0)

    def __getitem__(self, name: str) -> pa.ChunkedArray:
        return self.column(name)

    def select(self, columns: list[str]) -> pa.Table:
        """Only ``columns`` of every row, read whole (for the narrow columns a pool-wide step needs)."""
        return pa.Table.from_batches(
            list(self.batches(columns)), schema=pa.schema([self.schema.field(c) for c in columns])
        )


def spill_chunks(tables: Iterable[pa.Table], folder: Path, name: str, schema: pa.Schema) -> SpilledTable:
    """Write each of ``tables`` as ``folder/<name>-<i>.parquet`` and return them as one spilled table."""
    return SpilledTable(
        tuple(
            write_table(table.cast(schema), folder / f"{name}-{index:05d}.parquet")
            for index, table in enumerate(tables)
        ),
        schema,
    )


def table_batches(
    table: pa.Table | SpilledTable, columns: list[str] | None = None, batch_size: int = SPILL_BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """The rows of an in-memory or a spilled table, a batch at a time (only ``columns``, when given)."""
    if isinstance(table, SpilledTable):
        yield from table.batches(columns, batch_size)
    else:
        yield from (table.select(columns) if columns else table).to_batches(max_chunksize=batch_size)


def table_chunks(table: pa.Table | SpilledTable, rows: int) -> Iterator[pa.Table]:
    """Consecutive tables of at most ``rows`` rows (at least one, possibly empty)."""
    if isinstance(table, SpilledTable):
        yield from table.chunks(rows)
    else:
        yield from [table.slice(start, rows) for start in range(0, table.num_rows, rows)] or [table]
