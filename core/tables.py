"""Table I/O: Parquet writes that only appear when complete, and JSONL objects read strictly."""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
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

    def __enter__(self) -> "AtomicParquetWriter":
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
