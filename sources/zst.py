"""Streaming NDJSON over zstd files (pushshift dumps): chunks of lines in, never a whole file.

Pushshift frames use windows up to 2 GiB, so the decompressor allows them. A background
thread decompresses, cuts the output into chunks of complete lines and scans each chunk in
one pass of the C scanner ``_linescan`` for its newlines and for the patterns the reader
asked for; zstd and the scan release the GIL, so the reading thread only looks up the few
lines that matter (``Chunk.hits``), never splitting a chunk into Python lines. A line cut
by a block boundary (even inside a multi-byte UTF-8 character: 0x0A never occurs inside
one) is joined and becomes a one-line chunk. A cut-off download is detected by checking
that the last frame really ended: ``stream_reader`` would just stop there silently.
"""
from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import zstandard

from mmcurate.core.records import Rejected

from ._linescan import scan_lines, word_hashes

_END = object()  # the last item of a background reader
MAX_WINDOW = 2**31
WRITE_SIZE = 1 << 24  # zstd output per call: each call releases and retakes the GIL, which costs up to the
# switch interval while the reader runs Python, so few large calls keep decompression at full speed
DEFAULT_MAX_LINE = 1 << 20  # 1 MiB: longer lines are quarantined, not buffered
DEFAULT_CHUNK = 1 << 18  # compressed bytes per read: a few MiB of NDJSON per chunk
QUEUED = 4  # scanned chunks waiting for the reader
RAW_PREVIEW = 200  # bytes of an oversized line kept in quarantine


class _Frames:
    """Decompresses concatenated zstd frames; knows whether the last one is unfinished."""

    def __init__(self) -> None:
        self._dctx = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
        self._obj = self._dctx.decompressobj(write_size=WRITE_SIZE)
        self.open = False  # bytes of a frame were fed but the frame has not ended

    def feed(self, data: bytes) -> bytes:
        parts: list[bytes] = []
        while data:
            parts.append(self._obj.decompress(data))
            if self._obj.eof:  # frame ended; the rest of ``data`` starts the next one
                data = self._obj.unused_data
                self._obj = self._dctx.decompressobj(write_size=WRITE_SIZE)
                self.open = False
            else:
                data = b""
                self.open = True
        return parts[0] if len(parts) == 1 else b"".join(parts)


def _blocks(path: Path, chunk_bytes: int) -> Iterator[bytes | str | zstandard.ZstdError | None]:
    """Decompressed blocks, then one final item: ``None`` (clean end), ``"empty"``,
    ``"truncated"`` or a ZstdError."""
    frames = _Frames()
    fed = False
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(chunk_bytes):
                fed = True
                if block := frames.feed(chunk):
                    yield block
    except zstandard.ZstdError as exc:
        yield exc
        return
    yield "empty" if not fed else "truncated" if frames.open else None


class Chunk:
    """Complete consecutive lines of a dump, ``data[start:ends[-1] + 1]``, where ``ends``
    holds the offset of the newline closing each line, and where the patterns it was
    scanned for occur in each line (``hits``)."""

    __slots__ = ("first", "data", "start", "ends", "found")

    def __init__(self, first: int, data: bytes, start: int, ends: np.ndarray,
                 found: dict[bytes, np.ndarray] | None = None) -> None:
        self.first = first  # 1-based number of the first line
        self.data = data
        self.start = start
        self.ends = ends
        self.found = found or {}

    @classmethod
    def scan(cls, first: int, data: bytes, start: int, end: int, patterns: Mapping[bytes, int]) -> Chunk:
        """The lines of ``data[start:end]`` (it ends with a newline), found in one pass
        together with the first ``patterns[p]`` occurrences of each pattern ``p`` per line."""
        ends, hits = scan_lines(data, start, end, list(patterns), list(patterns.values()))
        ends = np.frombuffer(ends, np.int64)
        table = np.frombuffer(hits, np.int64).reshape(len(ends), -1)
        found, column = {}, 0
        for pattern, limit in patterns.items():
            found[pattern] = table[:, column:column + limit]
            column += limit
        return cls(first, data, start, ends, found)

    @property
    def lines(self) -> int:
        return len(self.ends)

    @property
    def end(self) -> int:
        """Where the chunk ends in ``data`` (after its last newline)."""
        return int(self.ends[-1]) + 1

    def text(self) -> bytes:
        return self.data[self.start:self.end]

    def line(self, index: int) -> bytes:
        begin = int(self.ends[index - 1]) + 1 if index else self.start
        return self.data[begin:int(self.ends[index])]

    def starts(self) -> np.ndarray:
        """Where each line starts in ``data``."""
        starts = np.empty_like(self.ends)
        starts[0] = self.start
        starts[1:] = self.ends[:-1] + 1
        return starts

    def nonempty(self) -> np.ndarray:
        """The indices of the lines that are not empty."""
        return np.flatnonzero(self.ends > self.starts())

    def hits(self, pattern: bytes) -> np.ndarray:
        """Where in ``data`` the first occurrences of a pattern the chunk was scanned for
        start in each line, -1 where there are fewer: shape (lines, its limit)."""
        return self.found[pattern]

    def word_hashes(self, key: bytes) -> np.ndarray:
        """Per line, ``_linescan.word_hash`` of the 1-64 regex word bytes right after the
        first ``key`` (a pattern the chunk was scanned for) when a quote closes them; -1
        where ``key`` does not occur, -2 where no such word follows it."""
        offsets = np.ascontiguousarray(self.hits(key)[:, 0])
        return np.frombuffer(word_hashes(self.data, offsets, self.ends, len(key)), np.int64)

    def part(self, begin: int, stop: int) -> Chunk:
        """Lines ``begin`` to ``stop`` (exclusive) as a chunk of their own."""
        start = int(self.ends[begin - 1]) + 1 if begin else self.start
        return Chunk(self.first + begin, self.data, start, self.ends[begin:stop],
                     {pattern: hits[begin:stop] for pattern, hits in self.found.items()})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Chunk) and (self.first, self.text()) == (other.first, other.text())

    def __repr__(self) -> str:
        return f"Chunk(first={self.first}, lines={self.lines}, text={self.text()[:60]!r})"


def read_chunks(
    path: Path | str,
    patterns: Mapping[bytes, int] | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE,
    chunk_bytes: int = DEFAULT_CHUNK,
) -> Iterator[Chunk | Rejected]:
    """Yield the lines of a zstd NDJSON file in chunks of complete lines, in file order,
    each scanned for ``patterns`` (pattern -> how many occurrences per line to keep).

    Empty lines stay in the chunks, so numbering is positional; the last line of a file
    that does not end with a newline gets one. Problems become ``Rejected`` rows: a line
    longer than ``max_line_bytes`` (left out of the chunks and never buffered whole when
    it spans several reads) at ``<file>:<line>``; a corrupt stream, an empty file or a
    truncated last frame at ``<file>``, ending the file after every complete line before it.

    A background thread decompresses, cuts and scans, at most QUEUED chunks ahead of the
    reader: zstd and the scan release the GIL, so both run on another core while the
    reader handles the lines found before. What the thread raises is raised here.
    """
    out: queue.Queue = queue.Queue(maxsize=QUEUED)
    stop = threading.Event()
    worker = threading.Thread(target=_produce, daemon=True,
                              args=(Path(path), dict(patterns or {}), max_line_bytes, chunk_bytes, out, stop))
    worker.start()
    try:
        while (item := out.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        worker.join()


def _produce(path: Path, patterns: dict[bytes, int], max_line_bytes: int, chunk_bytes: int, out: queue.Queue,
             stop: threading.Event) -> None:
    """The background thread of ``read_chunks``: its items, then ``_END`` or an exception."""
    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    try:
        for item in _chunks(path, patterns, max_line_bytes, chunk_bytes):
            if not put(item):
                return
    except BaseException as exc:  # noqa: BLE001 - whatever failed is the reader's to raise
        put(exc)
        return
    put(_END)


def _chunks(path: Path, patterns: dict[bytes, int], max_line_bytes: int, chunk_bytes: int) -> Iterator[Chunk | Rejected]:
    """``read_chunks``'s items, made in the calling thread."""
    name = path.name
    pending = b""
    discarding = False  # inside a line already known to be too long
    lineno = 0  # lines yielded (or rejected) so far

    def cut(data: bytes, start: int, end: int) -> Iterator[Chunk | Rejected]:
        nonlocal lineno
        chunk = Chunk.scan(lineno + 1, data, start, end, patterns)
        lineno += chunk.lines
        yield from _checked(name, chunk, max_line_bytes)

    for block in _blocks(path, chunk_bytes):
        if not isinstance(block, bytes):
            if isinstance(block, zstandard.ZstdError):
                yield Rejected(name, f"corrupt zstd stream after line {lineno}: {block}")
            elif block == "empty":
                yield Rejected(name, "empty file: no zstd frame")
            elif block == "truncated":
                yield Rejected(name, f"truncated zstd stream after line {lineno}")
            elif discarding:
                yield Rejected(f"{name}:{lineno + 1}", f"line longer than {max_line_bytes} bytes")
            elif pending:
                yield from cut(pending + b"\n", 0, len(pending) + 1)
            return
        first = block.find(b"\n")
        if first < 0:  # no newline: the open line goes on
            if not discarding:
                pending += block
        else:
            continued = discarding or bool(pending)  # the block's first line began in an earlier block
            if discarding:  # the line known to be too long ends here
                lineno += 1
                yield Rejected(f"{name}:{lineno}", f"line longer than {max_line_bytes} bytes")
                discarding = False
            elif pending:
                head = pending + block[:first + 1]
                yield from cut(head, 0, len(head))
            start, last = (first + 1 if continued else 0), block.rfind(b"\n")
            if last >= start:
                yield from cut(block, start, last + 1)
            pending = block[last + 1:]
        if len(pending) > max_line_bytes:
            discarding = True
            pending = b""


def _checked(name: str, chunk: Chunk, limit: int) -> Iterator[Chunk | Rejected]:
    """``chunk`` itself or, in the rare case that it holds lines longer than ``limit``, the
    chunks around a rejection of each such line."""
    if _overlong(chunk.data, chunk.start, chunk.end, limit) < 0:  # the common case, checked in a few jumps
        yield chunk
        return
    too_long = np.flatnonzero(np.diff(chunk.ends, prepend=chunk.start - 1) - 1 > limit)
    begin = 0  # index of the first line not yielded yet
    for index in map(int, too_long):
        if index > begin:
            yield chunk.part(begin, index)
        yield _oversized(name, chunk.first + index, chunk.line(index), limit)
        begin = index + 1
    if begin < chunk.lines:
        yield chunk.part(begin, chunk.lines)


def _overlong(data: bytes, start: int, end: int, limit: int) -> int:
    """Where the first line longer than ``limit`` starts in ``data[start:end]`` (complete
    lines), or -1. Jumps about ``limit`` bytes a step: from a line start, the last newline
    within ``limit`` bytes must exist, else the line starting there is too long."""
    while end - start > limit:
        newline = data.rfind(b"\n", start, start + limit + 1)
        if newline < 0:
            return start
        start = newline + 1
    return -1


def _oversized(name: str, lineno: int, line: bytes, limit: int) -> Rejected:
    preview = line[:RAW_PREVIEW].decode("utf-8", "replace")
    return Rejected(f"{name}:{lineno}", f"line longer than {limit} bytes ({len(line)})", preview)


def parse_object(locator: str, line: bytes) -> dict[str, Any] | Rejected:
    """Decode one NDJSON line into a dict, or say why it cannot be one.

    orjson parses; a line it refuses is parsed again by the standard library, which
    accepts what Python's json does (``NaN``, huge integers, lone surrogate escapes) and
    words the reason of a line that is truly broken.
    """
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            return Rejected(locator, f"invalid UTF-8 at byte {exc.start}", line.decode("utf-8", "replace"))
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            return Rejected(locator, f"malformed JSON: {exc.msg} at column {exc.colno}", text)
    if not isinstance(value, dict):
        return Rejected(locator, f"JSON line is a {type(value).__name__}, not an object", line.decode("utf-8"))
    return value
