"""Streaming NDJSON over zstd files (pushshift dumps): lines in, never a whole file.

Pushshift frames use windows up to 2 GiB, so the decompressor allows them. Input is fed
in compressed chunks; decompressed output is split on ``\\n`` as bytes, so a multi-byte
UTF-8 character cut by a chunk boundary simply stays in the pending partial line (0x0A
never occurs inside a multi-byte sequence). A cut-off download is detected by checking
that the last frame really ended: ``stream_reader`` would just stop there silently.
"""
from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import zstandard

from mmcurate.core.records import Rejected

MAX_WINDOW = 2**31
DEFAULT_MAX_LINE = 1 << 20  # 1 MiB: longer lines are quarantined, not buffered
DEFAULT_CHUNK = 1 << 18  # compressed bytes per read: a few MiB of NDJSON per chunk
QUEUED = 8  # decompressed blocks waiting for the line splitter
RAW_PREVIEW = 200  # bytes of an oversized line kept in quarantine


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

    Puts decompressed blocks, then one final item: ``None`` (clean end), ``"empty"``,
    ``"truncated"`` or a ZstdError.
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
                if block and not put(block):
                    return
    except zstandard.ZstdError as exc:
        put(exc)
        return
    put("empty" if not fed else "truncated" if frames.open else None)


def _blocks(path: Path, chunk_bytes: int) -> Iterator[bytes | str | zstandard.ZstdError | None]:
    """Decompressed blocks from a background thread; at most QUEUED blocks are held."""
    out: queue.Queue = queue.Queue(maxsize=QUEUED)
    stop = threading.Event()
    worker = threading.Thread(target=_decompress, args=(path, chunk_bytes, out, stop), daemon=True)
    worker.start()
    try:
        while True:
            item = out.get()
            yield item
            if not isinstance(item, bytes):
                return
    finally:
        stop.set()
        worker.join()


@dataclass(frozen=True)
class Chunk:
    """Consecutive complete lines of a dump, each ending with ``\\n``, as one bytes object:
    scanned whole with C-speed searches instead of being split into lines."""

    first: int  # 1-based number of the first line
    data: bytes
    lines: int  # the number of lines, ``data.count(b"\\n")``


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
    for out in _blocks(path, chunk_bytes):
        if not isinstance(out, bytes):
            if isinstance(out, zstandard.ZstdError):
                yield Rejected(name, f"corrupt zstd stream after line {lineno}: {out}")
            elif out == "empty":
                yield Rejected(name, "empty file: no zstd frame")
            elif out == "truncated":
                yield Rejected(name, f"truncated zstd stream after line {lineno}")
            elif discarding:
                yield Rejected(f"{name}:{lineno + 1}", f"line longer than {max_line_bytes} bytes")
            elif pending:
                yield from _checked(name, lineno + 1, pending + b"\n", 1, max_line_bytes)
            return
        if discarding:
            cut = out.find(b"\n")
            if cut < 0:
                continue
            lineno += 1
            yield Rejected(f"{name}:{lineno}", f"line longer than {max_line_bytes} bytes")
            discarding = False
            out = out[cut + 1:]
        cut = out.rfind(b"\n")
        if cut < 0:
            pending += out
        else:
            data = pending + out[:cut + 1] if pending else out[:cut + 1]
            pending = out[cut + 1:]
            count = data.count(b"\n")
            yield from _checked(name, lineno + 1, data, count, max_line_bytes)
            lineno += count
        if len(pending) > max_line_bytes:
            discarding = True
            pending = b""


def _checked(name: str, first: int, data: bytes, count: int, limit: int) -> Iterator[Chunk | Rejected]:
    """``data`` as one chunk, or, in the rare case that it holds a line longer than
    ``limit``, as the chunks around a rejection of each such line."""
    start = _overlong(data, 0, limit)
    if start < 0:
        yield Chunk(first, data, count)
        return
    begin, number = 0, first  # the part of ``data`` not yielded yet, and its first line
    while start >= 0:
        end = data.index(b"\n", start)
        before = data.count(b"\n", begin, start)
        if before:
            yield Chunk(number, data[begin:start], before)
        yield _oversized(name, number + before, data[start:end], limit)
        begin, number = end + 1, number + before + 1
        start = _overlong(data, begin, limit)
    if begin < len(data):
        yield Chunk(number, data[begin:], data.count(b"\n", begin))


def _overlong(data: bytes, start: int, limit: int) -> int:
    """Where the first line longer than ``limit`` starts in ``data[start:]`` (which begins a
    line), or -1. Jumps about ``limit`` bytes a step: the last newline within reach of a
    line start must exist, else the line from there is too long."""
    end = len(data)
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
