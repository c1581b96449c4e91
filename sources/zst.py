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
from pathlib import Path
from typing import Any

import zstandard

from mmcurate.core.records import Rejected

MAX_WINDOW = 2**31
DEFAULT_MAX_LINE = 1 << 20  # 1 MiB: longer lines are quarantined, not buffered
DEFAULT_CHUNK = 1 << 16  # compressed bytes per read: ~0.5-1 MiB of NDJSON, cache-friendly
QUEUED = 8  # decompressed blocks waiting for the line splitter
RAW_PREVIEW = 200  # bytes of an oversized line kept in quarantine

Block = tuple[int, list[bytes]]  # (1-based number of the first line, consecutive lines)


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


def read_blocks(
    path: Path | str,
    max_line_bytes: int = DEFAULT_MAX_LINE,
    chunk_bytes: int = DEFAULT_CHUNK,
) -> Iterator[Block | Rejected]:
    """Yield the lines of a zstd NDJSON file in blocks: ``(number of the first line, lines)``.

    Lines are bytes without their newline; empty lines stay in the list (as ``b""``) so
    numbering is positional. Problems become ``Rejected`` rows located at ``<file>:<line>``:
    a line longer than ``max_line_bytes`` (left out of the blocks, and never buffered whole
    when it spans several reads); a corrupt stream or a truncated last frame ends the file with one
    rejection, after every complete line before it was yielded.
    """
    path = Path(path)
    name = path.name
    pending = b""
    discarding = False  # inside a line already known to be too long
    lineno = 0  # lines yielded so far
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
                yield lineno + 1, [pending]
            return
        if discarding:
            cut = out.find(b"\n")
            if cut < 0:
                continue
            lineno += 1
            yield Rejected(f"{name}:{lineno}", f"line longer than {max_line_bytes} bytes")
            discarding = False
            out = out[cut + 1:]
        lines = out.split(b"\n")
        if pending:  # only the first line continues the previous block: no copy of the rest
            lines[0] = pending + lines[0]
        pending = lines.pop()
        if lines and max(map(len, lines)) > max_line_bytes:
            yield from _split_oversized(name, lineno, lines, max_line_bytes)
        elif lines:
            yield lineno + 1, lines
        lineno += len(lines)
        if len(pending) > max_line_bytes:
            discarding = True
            pending = b""


def _split_oversized(name: str, before: int, lines: list[bytes], limit: int) -> Iterator[Block | Rejected]:
    """The rare block holding a too-long line: sub-blocks around a rejection, in file order."""
    start = 0
    for i, line in enumerate(lines):
        if len(line) > limit:
            if i > start:
                yield before + 1 + start, lines[start:i]
            yield _oversized(name, before + 1 + i, line, limit)
            start = i + 1
    if start < len(lines):
        yield before + 1 + start, lines[start:]


def _oversized(name: str, lineno: int, line: bytes, limit: int) -> Rejected:
    preview = line[:RAW_PREVIEW].decode("utf-8", "replace")
    return Rejected(f"{name}:{lineno}", f"line longer than {limit} bytes ({len(line)})", preview)


def parse_object(locator: str, line: bytes) -> dict[str, Any] | Rejected:
    """Decode one NDJSON line into a dict, or say why it cannot be one."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Rejected(locator, f"invalid UTF-8 at byte {exc.start}", line.decode("utf-8", "replace"))
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return Rejected(locator, f"malformed JSON: {exc.msg} at column {exc.colno}", text)
    if not isinstance(value, dict):
        return Rejected(locator, f"JSON line is a {type(value).__name__}, not an object", text)
    return value
