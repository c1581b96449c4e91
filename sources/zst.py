"""Streaming NDJSON over zstd files (pushshift dumps): chunks of lines in, never a whole file.

Pushshift frames use windows up to 2 GiB, so the decompressor allows them. A background
thread feeds compressed reads to zstd (which releases the GIL) and finds the newlines of
each decompressed block with numpy (which releases it too), so the reading thread only
scans. A chunk is a run of complete lines inside one decompressed block plus the offsets
of their newlines: scanners search it whole with C-speed primitives and look line numbers
up in the offsets, never splitting it into lines. A line cut by a block boundary (even
inside a multi-byte UTF-8 character: 0x0A never occurs inside one) is joined and becomes a
one-line chunk. A cut-off download is detected by checking that the last frame really
ended: ``stream_reader`` would just stop there silently.
"""
from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import zstandard

from mmcurate.core.records import Rejected

MAX_WINDOW = 2**31
DEFAULT_MAX_LINE = 1 << 20  # 1 MiB: longer lines are quarantined, not buffered
DEFAULT_CHUNK = 1 << 18  # compressed bytes per read: a few MiB of NDJSON per chunk
QUEUED = 4  # decompressed blocks waiting to be scanned
RAW_PREVIEW = 200  # bytes of an oversized line kept in quarantine
NEWLINE = 0x0A


class _Frames:
    """Decompresses concatenated zstd frames; knows whether the last one is unfinished."""

    def __init__(self) -> None:
        self._dctx = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
        self._obj = self._dctx.decompressobj()
        self.open = False  # bytes of a frame were fed but the frame has not ended

    def feed(self, data: bytes) -> bytes:
        parts: list[bytes] = []
        while data:
            parts.append(self._obj.decompress(data))
            if self._obj.eof:  # frame ended; the rest of ``data`` starts the next one
                data = self._obj.unused_data
                self._obj = self._dctx.decompressobj()
                self.open = False
            else:
                data = b""
                self.open = True
        return parts[0] if len(parts) == 1 else b"".join(parts)


def _decompress(path: Path, chunk_bytes: int, out: queue.Queue, stop: threading.Event) -> None:
    """Producer thread: zstd releases the GIL, so decompression overlaps line handling.

    Puts ``(block, offsets of its newlines)``, then one final item: ``None`` (clean end),
    ``"empty"``, ``"truncated"`` or a ZstdError.
    """
    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    frames = _Frames()
    fed = False
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(chunk_bytes):
                fed = True
                block = frames.feed(chunk)
                if block and not put((block, np.flatnonzero(np.frombuffer(block, np.uint8) == NEWLINE))):
                    return
    except zstandard.ZstdError as exc:
        put(exc)
        return
    put("empty" if not fed else "truncated" if frames.open else None)


def _blocks(path: Path, chunk_bytes: int) -> Iterator[tuple[bytes, np.ndarray] | str | zstandard.ZstdError | None]:
    """Decompressed blocks from a background thread; at most QUEUED blocks are held."""
    out: queue.Queue = queue.Queue(maxsize=QUEUED)
    stop = threading.Event()
    worker = threading.Thread(target=_decompress, args=(path, chunk_bytes, out, stop), daemon=True)
    worker.start()
    try:
        while True:
            item = out.get()
            yield item
            if not isinstance(item, tuple):
                return
    finally:
        stop.set()
        worker.join()


class Chunk:
    """Complete consecutive lines of a dump: ``data[start:ends[-1] + 1]``, where ``ends``
    holds the offset of the newline closing each line."""

    __slots__ = ("first", "data", "start", "ends")

    def __init__(self, first: int, data: bytes, start: int, ends: np.ndarray) -> None:
        self.first = first  # 1-based number of the first line
        self.data = data
        self.start = start
        self.ends = ends

    @property
    def lines(self) -> int:
        return len(self.ends)

    @property
    def end(self) -> int:
        """Where the chunk ends in ``data`` (after its last newline)."""
        return int(self.ends[-1]) + 1

    def text(self) -> bytes:
        return self.data[self.start:self.end]

    def index_at(self, offset: int) -> int:
        """The index of the line holding byte ``offset`` of ``data``."""
        return int(self.ends.searchsorted(offset))

    def line(self, index: int) -> bytes:
        begin = int(self.ends[index - 1]) + 1 if index else self.start
        return self.data[begin:int(self.ends[index])]

    def empty_lines(self) -> int:
        """How many of the lines are empty: a newline right after the previous one."""
        ends = self.ends
        return int(ends[0] == self.start) + int(np.count_nonzero(ends[1:] - ends[:-1] == 1))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Chunk) and (self.first, self.text()) == (other.first, other.text())

    def __repr__(self) -> str:
        return f"Chunk(first={self.first}, lines={self.lines}, text={self.text()[:60]!r})"


def read_chunks(
    path: Path | str,
    max_line_bytes: int = DEFAULT_MAX_LINE,
    chunk_bytes: int = DEFAULT_CHUNK,
) -> Iterator[Chunk | Rejected]:
    """Yield the lines of a zstd NDJSON file in chunks of complete lines, in file order.

    Empty lines stay in the chunks, so numbering is positional; the last line of a file
    that does not end with a newline gets one. Problems become ``Rejected`` rows: a line
    longer than ``max_line_bytes`` (left out of the chunks and never buffered whole when
    it spans several reads) at ``<file>:<line>``; a corrupt stream, an empty file or a
    truncated last frame at ``<file>``, ending the file after every complete line before it.
    """
    path = Path(path)
    name = path.name
    pending = b""
    discarding = False  # inside a line already known to be too long
    lineno = 0  # lines yielded (or rejected) so far
    for item in _blocks(path, chunk_bytes):
        if not isinstance(item, tuple):
            if isinstance(item, zstandard.ZstdError):
                yield Rejected(name, f"corrupt zstd stream after line {lineno}: {item}")
            elif item == "empty":
                yield Rejected(name, "empty file: no zstd frame")
            elif item == "truncated":
                yield Rejected(name, f"truncated zstd stream after line {lineno}")
            elif discarding:
                yield Rejected(f"{name}:{lineno + 1}", f"line longer than {max_line_bytes} bytes")
            elif pending:
                yield from _checked(name, Chunk(lineno + 1, pending + b"\n", 0, np.array([len(pending)])),
                                    max_line_bytes)
            return
        block, ends = item
        if not len(ends):  # no newline: the open line goes on
            if not discarding:
                pending += block
        else:
            first = int(ends[0])
            continued = discarding or bool(pending)  # the block's first line began in an earlier block
            if discarding:  # the line known to be too long ends here
                lineno += 1
                yield Rejected(f"{name}:{lineno}", f"line longer than {max_line_bytes} bytes")
                discarding = False
            elif pending:
                head = pending + block[:first + 1]
                yield from _checked(name, Chunk(lineno + 1, head, 0, np.array([len(head) - 1])), max_line_bytes)
                lineno += 1
            rest, start = (ends[1:], first + 1) if continued else (ends, 0)
            if len(rest):
                chunk = Chunk(lineno + 1, block, start, rest)
                yield from _checked(name, chunk, max_line_bytes)
                lineno += chunk.lines
            pending = block[int(ends[-1]) + 1:]
        if len(pending) > max_line_bytes:
            discarding = True
            pending = b""


def _checked(name: str, chunk: Chunk, limit: int) -> Iterator[Chunk | Rejected]:
    """``chunk`` itself or, in the rare case that it holds lines longer than ``limit``, the
    chunks around a rejection of each such line."""
    if _overlong(chunk.data, chunk.start, chunk.end, limit) < 0:  # the common case, checked in a few jumps
        yield chunk
        return
    ends = chunk.ends
    too_long = np.flatnonzero(np.diff(ends, prepend=chunk.start - 1) - 1 > limit)
    begin = 0  # index of the first line not yielded yet
    for index in map(int, too_long):
        if index > begin:
            start = int(chunk.ends[begin - 1]) + 1 if begin else chunk.start
            yield Chunk(chunk.first + begin, chunk.data, start, chunk.ends[begin:index])
        yield _oversized(name, chunk.first + index, chunk.line(index), limit)
        begin = index + 1
    if begin < chunk.lines:
        yield Chunk(chunk.first + begin, chunk.data, int(chunk.ends[begin - 1]) + 1, chunk.ends[begin:])


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
