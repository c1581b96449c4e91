"""The streaming zstd NDJSON reader: chunk boundaries, bad lines, truncation."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import pytest
import zstandard

from mmcurate.core.records import Rejected
from mmcurate.sources import zst
from mmcurate.sources.zst import Batch, _Handover, parse_object
from mmcurate.sources.zst import read_lines as read_batches


def write(path: Path, data: bytes, *, frames: int = 1) -> Path:
    """Compress ``data`` as ``frames`` concatenated zstd frames split at newlines."""
    comp = zstandard.ZstdCompressor(level=3)
    lines = data.split(b"\n")
    step = -(-len(lines) // frames)
    parts = [b"\n".join(lines[i : i + step]) for i in range(0, len(lines), step)]
    payload = [p + (b"\n" if i < len(parts) - 1 else b"") for i, p in enumerate(parts)]
    path.write_bytes(b"".join(comp.compress(p) for p in payload))
    return path


def picked_lines(path: Path, **kwargs) -> list:
    """``read_lines`` with its default picker (every non-empty line) flattened to
    ``(line number, bytes)``, rejections in place."""
    out: list = []
    for batch in read_batches(path, **kwargs):
        if isinstance(batch, Rejected):
            out.append(batch)
        else:
            assert all(tag == 0 for _, tag, _ in batch.picks) and batch.counts == (0, 0)
            out += [(n, line) for n, _, line in batch.picks]
    return out


def ndjson(n: int) -> bytes:
    # multi-byte characters everywhere, so tiny chunks split them
    return b"".join(
        json.dumps({"i": i, "t": "caf\u00e9 \u6f22\u5b57 \U0001f431"}, ensure_ascii=False).encode() + b"\n"
        for i in range(n)
    )


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
@pytest.mark.parametrize("frames", [1, 3])
def test_lines_survive_any_chunking(tmp_path: Path, chunk: int, frames: int) -> None:
    path = write(tmp_path / "RC_2023-01.zst", ndjson(50), frames=frames)
    items = list(picked_lines(path, chunk_bytes=chunk))
    assert [n for n, _ in items] == list(range(1, 51))
    assert [json.loads(line.decode())["i"] for _, line in items] == list(range(50))
    assert all(json.loads(line.decode())["t"] == "caf\u00e9 \u6f22\u5b57 \U0001f431" for _, line in items)


def test_last_line_without_newline_and_blank_lines(tmp_path: Path) -> None:
    path = write(tmp_path / "RS.zst", b'{"a":1}\n\n{"a":2}')
    assert list(picked_lines(path)) == [(1, b'{"a":1}'), (3, b'{"a":2}')]


def test_oversized_lines_rejected_not_buffered(tmp_path: Path) -> None:
    big = b'{"x":"' + b"y" * 5000 + b'"}'
    path = write(tmp_path / "RS_2023-01.zst", b'{"a":1}\n' + big + b'\n{"a":2}\n' + big)
    for chunk in (16, 1 << 20):  # inside one chunk, and spread over many
        items = list(picked_lines(path, max_line_bytes=1000, chunk_bytes=chunk))
        assert items[0] == (1, b'{"a":1}') and items[2] == (3, b'{"a":2}')
        for item, line in ((items[1], 2), (items[3], 4)):
            assert isinstance(item, Rejected)
            assert item.locator == f"RS_2023-01.zst:{line}"
            assert item.reason.startswith("line longer than 1000 bytes")


def test_truncated_stream_keeps_complete_frames(tmp_path: Path) -> None:
    comp = zstandard.ZstdCompressor(level=3)
    first, second = ndjson(4), ndjson(30)
    cut = comp.compress(second)
    path = tmp_path / "RC_2023-02.zst"
    path.write_bytes(comp.compress(first) + cut[: len(cut) // 2])
    items = list(picked_lines(path))
    assert [n for n, _ in items[:-1]] == [1, 2, 3, 4]
    assert items[-1] == Rejected("RC_2023-02.zst", "truncated zstd stream after line 4")


def test_truncated_large_frame_keeps_what_was_decoded(tmp_path: Path) -> None:
    # one frame of several blocks: whole blocks before the cut are still decoded
    data = ndjson(20000)
    blob = zstandard.ZstdCompressor(level=1).compress(data)
    path = tmp_path / "RC.zst"
    path.write_bytes(blob[: len(blob) * 3 // 4])
    items = list(picked_lines(path))
    rejected = [i for i in items if isinstance(i, Rejected)]
    good = [i for i in items if not isinstance(i, Rejected)]
    assert len(rejected) == 1 and len(good) > 1000
    assert rejected[0].reason == f"truncated zstd stream after line {len(good)}"


def test_corrupt_and_empty_files(tmp_path: Path) -> None:
    garbage = tmp_path / "RS_bad.zst"
    garbage.write_bytes(b"this is not zstd at all")
    (item,) = list(picked_lines(garbage))
    assert item.locator == "RS_bad.zst" and item.reason.startswith("corrupt zstd stream after line 0")
    empty = tmp_path / "RS_empty.zst"
    empty.write_bytes(b"")
    assert list(picked_lines(empty)) == [Rejected("RS_empty.zst", "empty file: no zstd frame")]


def test_parse_object() -> None:
    assert parse_object("f:1", b'{"a": "\xc3\xa9"}') == {"a": "\u00e9"}
    bad_utf8 = parse_object("f:2", b'{"a": "\xff"}')
    assert isinstance(bad_utf8, Rejected) and bad_utf8.locator == "f:2"
    assert bad_utf8.reason == "invalid UTF-8 at byte 7"
    malformed = parse_object("f:3", b'{"a": ')
    assert isinstance(malformed, Rejected) and malformed.reason.startswith("malformed JSON: Expecting value")
    assert malformed.raw == '{"a": '
    array = parse_object("f:4", b"[1, 2]")
    assert isinstance(array, Rejected) and array.reason == "JSON line is a list, not an object"


def test_lines_keep_their_numbers_around_rejected_ones(tmp_path: Path) -> None:
    path = write(tmp_path / "RC.zst", b'{"a":1}\n\n' + b"z" * 50 + b'\n{"a":2}\n' + b"y" * 21 + b"\n" + b"x" * 20)
    items = [b if isinstance(b, Rejected) else b.picks for b in read_batches(path, max_line_bytes=20)]
    assert items == [
        [(1, 0, b'{"a":1}')],
        Rejected("RC.zst:3", "line longer than 20 bytes (50)", "z" * 50),
        [(4, 0, b'{"a":2}')],
        Rejected("RC.zst:5", "line longer than 20 bytes (21)", "y" * 21),
        [(6, 0, b"x" * 20)],
    ]


def test_a_picker_sees_complete_lines_numbered_across_blocks(tmp_path: Path) -> None:
    """What a picker is given: runs of complete lines, numbered on from the runs before."""
    path = write(tmp_path / "RC.zst", ndjson(300), frames=3)
    seen: list[tuple[int, bytes]] = []

    def odd_lines(data: bytes, start: int, end: int, first: int) -> tuple[int, list, tuple[int, ...]]:
        lines = data[start:end].split(b"\n")[:-1]
        seen.extend(zip(range(first, first + len(lines)), lines))
        picked = [(n, 7, line) for n, line in enumerate(lines, first) if n % 2]
        return len(lines), picked, (len(lines) - len(picked),)

    batches = list(read_batches(path, odd_lines, chunk_bytes=97))
    assert seen == list(enumerate(ndjson(300).split(b"\n")[:-1], 1))
    assert [n for b in batches for n, _, _ in b.picks] == list(range(1, 301, 2))
    assert sum(b.counts[0] for b in batches) == 150 and all(isinstance(b, Batch) for b in batches)


def test_what_the_reading_thread_raises_is_raised_to_the_reader(tmp_path: Path) -> None:
    path = write(tmp_path / "RC.zst", ndjson(10))

    def broken(data: bytes, start: int, end: int, first: int) -> tuple[int, list, tuple[int, ...]]:
        raise RuntimeError("picker failed")

    with pytest.raises(RuntimeError, match="picker failed"):
        list(read_batches(path, broken))


def test_the_handover_holds_a_bounded_number_of_bytes() -> None:
    handover = _Handover(limit=100)
    assert handover._room_for(500)  # an empty handover takes any one item
    assert handover.put("a", 80)
    assert handover._room_for(20) and not handover._room_for(21) and not handover._room_for(500)
    results: list[bool] = []
    late = threading.Thread(target=lambda: results.append(handover.put("b", 500)))
    late.start()  # "b" waits for room
    assert handover.get() == "a"  # now "b" fits
    late.join()
    assert results == [True] and handover.get() == "b"
    handover.close()
    assert handover.put("c", 1) is False


def test_a_reader_that_stops_early_stops_the_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zst, "HANDOVER_BYTES", 1)  # the thread waits for room after every batch
    path = write(tmp_path / "RC.zst", ndjson(5000))
    batches = read_batches(path, chunk_bytes=64)
    assert isinstance(next(batches), Batch)
    batches.close()  # closes the handover and joins the thread, which must not wait on for room
    assert not [t for t in threading.enumerate() if t.name.startswith("zst-")]


@pytest.mark.parametrize("limit", [1, 5, 8, 9, 40])
def test_every_overlong_line_is_found_wherever_it_sits(tmp_path: Path, limit: int) -> None:
    lines = [b"a" * n for n in (3, 9, 0, 8, 1, 17, 8, 2, 40, 9)]
    path = write(tmp_path / "RC.zst", b"\n".join(lines) + b"\n")
    items = picked_lines(path, max_line_bytes=limit)
    rejected = {i.locator for i in items if isinstance(i, Rejected)}
    assert rejected == {f"RC.zst:{n}" for n, line in enumerate(lines, 1) if len(line) > limit}
    assert [n for n, _ in (i for i in items if not isinstance(i, Rejected))] == [
        n for n, line in enumerate(lines, 1) if line and len(line) <= limit
    ]


def test_parse_object_accepts_what_json_accepts() -> None:
    value = parse_object("f:1", b'{"a": NaN, "b": 123456789012345678901234567890, "c": "\\ud83d"}')
    assert math.isnan(value.pop("a")) and value == {"b": 123456789012345678901234567890, "c": "\ud83d"}
    assert parse_object("f:2", b'{"a": Infinity}')["a"] == float("inf")
