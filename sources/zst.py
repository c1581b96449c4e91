"""Streaming NDJSON over zstd files (pushshift dumps): picked lines out, never a whole file.

Pushshift frames use windows up to 2 GiB, so the decompressor allows them. A background
thread decompresses about a megabyte at a time, cuts it into runs of complete lines and
hands each run, while it is still in the CPU's cache, to a picker: one pass of a line
scanner (``linescan.line_scanner``) that decides every line and copies out only the ones
the reader must parse. zstd and the C scanner release the GIL, so the reading thread gets
batches of picked lines and never touches the rest (the pure-Python scanner holds the GIL
while it picks). A line cut by a block boundary (even inside a
multi-byte UTF-8 character: 0x0A never occurs inside one) is joined before it is picked.
A cut-off download is detected by checking that the last frame really ended:
``stream_reader`` would just stop there silently.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson
import zstandard

from mmcurate.core.records import Rejected

from .base import TOO_DEEP
from .linescan import line_scanner

_END = object()  # the last item of a background reader
MAX_WINDOW = 2**31
WRITE_SIZE = 1 << 20  # zstd output buffer per call: what one piece decompresses to fits in it, and in the cache
DEFAULT_MAX_LINE = 1 << 20  # 1 MiB: longer lines are quarantined, not buffered
DEFAULT_CHUNK = 1 << 16  # compressed bytes per decompression call: under a megabyte of NDJSON, picked while cached
READ_BYTES = 1 << 20  # compressed bytes per file read, decompressed chunk_bytes at a time: fewer GIL hand-overs
HANDOVER_BYTES = 32 << 20  # picked lines waiting for the reader
RAW_PREVIEW = 200  # bytes of an oversized line kept in quarantine


class _Frames:
    """Decompresses concatenated zstd frames; knows whether the last one is unfinished."""

    def __init__(self) -> None:
        self._dctx = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
        self._obj = self._dctx.decompressobj(write_size=WRITE_SIZE)
        self.open = False  # bytes of a frame were fed but the frame has not ended

    def feed(self, data: bytes | memoryview) -> bytes:
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
    """Decompressed blocks, one per ``chunk_bytes`` of compressed input, then one final
    item: ``None`` (clean end), ``"empty"``, ``"truncated"`` or a ZstdError.

    The thread gives up the GIL for every file read and every decompression call, and
    taking it back waits for the reader thread to let go: so the file is read a megabyte
    at a time, and decompressed in pieces whose output stays in the CPU's cache.
    """
    frames = _Frames()
    fed = False
    try:
        with open(path, "rb") as handle:
            while piece := handle.read(max(READ_BYTES, chunk_bytes)):
                fed = True
                view = memoryview(piece)
                for at in range(0, len(piece), chunk_bytes):
                    if block := frames.feed(view[at : at + chunk_bytes]):
                        yield block
    except zstandard.ZstdError as exc:
        yield exc
        return
    yield "empty" if not fed else "truncated" if frames.open else None


Pick = tuple[int, int, bytes]  # (line number, tag, line) of a picked line


class Picker(Protocol):
    """Decides the lines of ``data[start:end]`` (complete lines, numbered from ``first``) in
    one pass: ``(lines, picks, counts)`` as the line scanners' functions return them; a
    scanner's ``pick_lines`` keeps every non-empty line (tag 0)."""

    def __call__(self, data: bytes, start: int, end: int, first: int) -> tuple[int, list[Pick], tuple[int, ...]]: ...


@dataclass(frozen=True, slots=True)
class Batch:
    """The picked lines of a run of consecutive complete lines, and how many of its other
    lines were left out for each of the picker's reasons."""

    picks: list[Pick]
    counts: tuple[int, ...]

    @property
    def size(self) -> int:
        """Roughly the bytes it holds, for the hand-over's bound."""
        return 64 + sum(len(line) + 64 for _, _, line in self.picks)


class _Handover:
    """Items from the producer thread to the reader, in order, holding at most ``limit``
    bytes (at least one item): picked lines are few, so the producer can run far ahead
    of a reader that is busy with a burst of them."""

    def __init__(self, limit: int) -> None:
        self._items: deque[tuple[object, int]] = deque()
        self._held = 0
        self._limit = limit
        self._ready = threading.Condition()
        self.closed = False  # the reader left: the producer stops

    def put(self, item: object, size: int) -> bool:
        """Wait for room, then queue ``item``; False when the reader has left."""
        with self._ready:
            while not self._room_for(size) and not self.closed:
                self._ready.wait()
            if self.closed:
                return False
            self._items.append((item, size))
            self._held += size
            self._ready.notify_all()
            return True

    def _room_for(self, size: int) -> bool:
        return not self._held or self._held + size <= self._limit

    def get(self) -> object:
        with self._ready:
            while not self._items:
                self._ready.wait()
            item, size = self._items.popleft()
            self._held -= size
            self._ready.notify_all()
            return item

    def close(self) -> None:
        with self._ready:
            self.closed = True
            self._ready.notify_all()


def read_lines(
    path: Path | str,
    picker: Picker | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE,
    chunk_bytes: int = DEFAULT_CHUNK,
) -> Iterator[Batch | Rejected]:
    """Yield the lines of a zstd NDJSON file that ``picker`` picks (by default every non-empty
    line, with ``line_scanner``'s ``pick_lines``), in batches, in file order.

    Lines are numbered from 1, empty ones included; the last line of a file that does not
    end with a newline gets one. Problems become ``Rejected`` rows: a line longer than
    ``max_line_bytes`` (never given to the picker, and never buffered whole when it spans
    several reads) at ``<file>:<line>``; a corrupt stream, an empty file or a truncated
    last frame at ``<file>``, ending the file after every complete line before it.

    A background thread decompresses, cuts into runs of complete lines and picks: zstd and
    the C picker release the GIL, so all of it runs on another core while the reader handles
    the lines picked before, and only the picked lines cross over. What the thread raises
    is raised here.
    """
    picker = picker or line_scanner()[1].pick_lines
    handover = _Handover(HANDOVER_BYTES)
    worker = threading.Thread(
        target=_produce,
        daemon=True,
        name=f"zst-{Path(path).name}",
        args=(Path(path), picker, max_line_bytes, chunk_bytes, handover),
    )
    worker.start()
    try:
        while (item := handover.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]
    finally:
        handover.close()
        worker.join()


def _produce(path: Path, picker: Picker, max_line_bytes: int, chunk_bytes: int, handover: _Handover) -> None:
    """The background thread of ``read_lines``: its items, then ``_END`` or an exception."""
    try:
        for item in _batches(path, picker, max_line_bytes, chunk_bytes):
            if not handover.put(item, item.size if isinstance(item, Batch) else 1024):
                return
    except BaseException as exc:  # noqa: BLE001 - whatever failed is the reader's to raise
        handover.put(exc, 0)
        return
    handover.put(_END, 0)


def _batches(path: Path, picker: Picker, max_line_bytes: int, chunk_bytes: int) -> Iterator[Batch | Rejected]:
    """``read_lines``'s items, made in the calling thread."""
    name = path.name
    pending = b""
    discarding = False  # inside a line already known to be too long
    lineno = 0  # lines picked from (or rejected) so far

    def cut(data: bytes, start: int, end: int) -> Iterator[Batch | Rejected]:
        """The complete lines ``data[start:end]``: picked, each too-long one rejected."""
        nonlocal lineno
        while start < end:
            at = _overlong(data, start, end, max_line_bytes)
            stop = end if at < 0 else at
            if stop > start:
                lines, picks, counts = picker(data, start, stop, lineno + 1)
                lineno += lines
                yield Batch(picks, counts)
            if at < 0:
                return
            newline = data.index(b"\n", at, end)
            lineno += 1
            yield _oversized(name, lineno, data[at:newline], max_line_bytes)
            start = newline + 1

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
                head = pending + block[: first + 1]
                yield from cut(head, 0, len(head))
            start, last = (first + 1 if continued else 0), block.rfind(b"\n")
            if last >= start:
                yield from cut(block, start, last + 1)
            pending = block[last + 1 :]
        if len(pending) > max_line_bytes:
            discarding = True
            pending = b""


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
            # json words one message "Unterminated string starting at": no second "at"
            return Rejected(locator, f"malformed JSON: {exc.msg.removesuffix(' at')} at column {exc.colno}", text)
        except RecursionError:
            return Rejected(locator, f"malformed JSON: {TOO_DEEP}", text)
    if not isinstance(value, dict):
        return Rejected(locator, f"JSON line is a {type(value).__name__}, not an object", line.decode("utf-8"))
    return value
