"""Issue 31 item 13: the knowledge-base index of a RefLVQA evaluation embeds through a
resumable on-disk store and says how far it is: an interrupted embedding resumes without
embedding a finished row again."""

from __future__ import annotations

import numpy as np
import pytest

from mmcurate.retrieval.resumable_index import resumable_index
from mmcurate.retrieval.vector_index import top_hits

IDS = [f"d{i}" for i in range(10)]
TEXTS = [f"text {i}" for i in range(10)]


class Stub:
    """Encodes ``text i`` as a one-hot vector; raises on the call after ``fail_after`` batches."""

    name, dim = "stub-onehot", 10

    def __init__(self, fail_after: int | None = None) -> None:
        self.fail_after = fail_after
        self.seen: list[str] = []
        self.batches = 0

    def encode_text(self, texts):
        if self.fail_after is not None and self.batches == self.fail_after:
            raise KeyboardInterrupt("stopped")
        self.batches += 1
        self.seen += texts
        return np.stack([np.eye(self.dim, dtype=np.float32)[int(t.split()[1])] for t in texts])


def build(tmp_path, encoder, lines):
    return resumable_index(
        tmp_path,
        "kb",
        encoder.name,
        encoder.dim,
        "fp",
        IDS,
        TEXTS,
        encoder.encode_text,
        lines.append,
        shard_rows=4,
        batch=2,
        every=0.0,
    )


def test_an_interrupted_embedding_resumes_without_embedding_finished_rows(tmp_path):
    lines: list[str] = []
    first = Stub(fail_after=3)  # shard 0 (2 batches) finished, shard 1 stopped in its second batch
    with pytest.raises(KeyboardInterrupt):
        build(tmp_path, first, lines)
    assert first.seen == TEXTS[:6]
    assert lines == ["kb: embedding: 4/10 rows (40%), " + lines[0].split("(40%), ", 1)[1]]
    again, lines = Stub(), []
    index = build(tmp_path, again, lines)
    assert again.seen == TEXTS[4:]  # shard 1 again from its start, shard 2; never rows 0-3
    assert lines[0] == "kb: resuming, 4 of 10 rows embedded before"
    assert [line.split(" rows", 1)[0] for line in lines[1:3]] == ["kb: embedding: 4/6", "kb: embedding: 6/6"]
    assert lines[3] == "kb: building a flat index over 10 vectors" and lines[4].startswith("kb: index ready (")
    assert len(index) == 10 and [row for row, _ in top_hits(index, np.eye(10, dtype=np.float32)[[7]], 1)[0]] == [7]
    assert not list(tmp_path.glob("*.store"))  # the store goes once the index is in place
    cached, lines = Stub(), []
    assert len(build(tmp_path, cached, lines)) == 10 and cached.seen == [] and lines == []  # the cache: no work


def test_progress_lines_come_at_a_bounded_rate(tmp_path):
    lines: list[str] = []
    resumable_index(
        tmp_path,
        "kb",
        "stub-onehot",
        10,
        "fp",
        IDS,
        TEXTS,
        Stub().encode_text,
        lines.append,
        shard_rows=2,
        batch=2,
        every=3600.0,
    )
    embedding = [line for line in lines if "embedding" in line]
    assert [line.split(" rows", 1)[0] for line in embedding] == ["kb: embedding: 2/10", "kb: embedding: 10/10"]


def test_progress_goes_to_stderr_by_default(tmp_path, capsys):
    """Issue 42 item 19: ``evaluate ... > table.md`` got the embedding lines before the table (the
    default progress was ``print`` bound at import, past Prefect's log_prints): stdout stays clean."""
    resumable_index(tmp_path, "kb", "stub-onehot", 10, "fp", IDS, TEXTS, Stub().encode_text, shard_rows=4, batch=2)
    printed = capsys.readouterr()
    assert printed.out == "" and "kb: embedding: 10/10 rows" in printed.err and "kb: index ready (" in printed.err


def test_two_builders_of_one_index_at_once_both_get_it(tmp_path):
    """Two shards of the RefLVQA citation stage embed one corpus at once (threads): the second
    waits for the first's build and loads it, instead of writing into the store the first
    removes (FileNotFoundError on the first's rename, as in test_reflvqa_flow). The first
    builder lets the second run while it embeds and waits (bounded) for it to finish: on the old
    code the second builds alone and removes the store under the first; here it waits on the
    lock, the wait times out, and both then return the one index."""
    import threading

    second_done = threading.Event()
    results: dict[str, object] = {}

    def second() -> None:
        results["second"] = build(tmp_path, Stub(), [])
        second_done.set()

    class First(Stub):
        def encode_text(self, texts):
            if self.batches == 0:
                threading.Thread(target=second).start()
                second_done.wait(timeout=5)
            return super().encode_text(texts)

    first = First()
    results["first"] = build(tmp_path, first, [])
    assert second_done.wait(timeout=120)
    assert first.seen == TEXTS  # the first embedded every row once
    for index in results.values():
        assert len(index) == 10 and [hits[0][0] for hits in top_hits(index, np.eye(10, dtype=np.float32), 1)] == list(
            range(10)
        )
