"""Near-duplicate questions from numpy LSH bands (issue 36 item 2): the pairs are exactly those
datasketch's MinHashLSH index finds and the exact Jaccard confirms, with no MinHash object or
byte key held per question."""
from __future__ import annotations

import random

import pytest
from datasketch import MinHash, MinHashLSH

from mmcurate.annotation.dedup import Item, item, jaccard, lsh_bands, question_pairs


def _index_pairs(items: list[Item], threshold: float, num_perm: int) -> dict[tuple[int, int], float]:
    """The pairs as a MinHashLSH index over one MinHash per question finds them."""
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    signatures = []
    for index, it in enumerate(items):
        signature = MinHash(num_perm=num_perm)
        signature.update_batch([s.encode("utf-8") for s in it.shingles])
        signatures.append(signature)
        if it.shingles:
            lsh.insert(str(index), signature)
    out = {}
    for index, it in enumerate(items):
        if not it.shingles:
            continue
        for other in map(int, lsh.query(signatures[index])):
            key = (min(index, other), max(index, other))
            if other != index and key not in out and (score := jaccard(it.shingles, items[other].shingles)) >= threshold:
                out[key] = round(score, 4)
    return out


def _questions(n: int) -> list[str]:
    rng = random.Random(7)
    words = "what colour is the kite door boat lamp in listing code painted red blue".split()
    out: list[str] = []
    for _ in range(n):
        if out and rng.random() < 0.35:  # a near copy of an earlier question
            chars = list(rng.choice(out))
            if chars and rng.random() < 0.5:
                chars[rng.randrange(len(chars))] = rng.choice("xyz")
            out.append("".join(chars))
        else:
            out.append(" ".join(rng.choice(words) for _ in range(rng.randint(0, 9))))
    return out


@pytest.mark.parametrize("threshold", [0.5, 0.8])
def test_band_pairs_are_the_index_pairs(threshold: float):
    items = [item(f"s{i}", "this release", q, []) for i, q in enumerate(_questions(1500))]
    expected = _index_pairs(items, threshold, 128)
    assert expected  # the questions hold near-duplicates to find
    assert question_pairs(items, threshold, 128) == expected


def test_bands_are_a_small_array_per_question():
    bands, present = lsh_bands(["What colour is the kite?", "", "What colour is the kite?"], 0.8, 128)
    assert bands.shape == (3, MinHashLSH(threshold=0.8, num_perm=128).b) and bands.dtype.name == "uint64"
    assert present.tolist() == [True, False, True] and (bands[0] == bands[2]).all()


def test_flags_held_as_ledger_tables_are_the_same_rows(tmp_path, monkeypatch):
    """Many flags become LEDGER tables ``LEDGER_CHUNK`` at a time: the same rows, in the same order,
    in the stage's ledger and in the part a shard spills."""
    import pyarrow as pa

    from mmcurate.annotation import dedup
    from mmcurate.core.config import DedupConfig, Settings
    from mmcurate.core.images import ImageStore
    from mmcurate.core.stages import StageContext

    questions = [f"In what year was telescope number {n // 4} launched into orbit{'?' * (n % 2)}" for n in range(60)]
    table = pa.table({"sample_id": [f"s{i}" for i in range(60)], "question": questions, "images": [[]] * 60})
    ctx = StageContext(Settings(), "run", ImageStore(tmp_path / "images"))
    whole = dedup.NearDuplicates(DedupConfig()).run(table, ctx)
    monkeypatch.setattr(dedup, "LEDGER_CHUNK", 2)
    chunked = dedup.NearDuplicates(DedupConfig()).run(table, ctx)
    assert whole.ledger_tables == [] and len(chunked.ledger_tables) > 2 and chunked.decisions == []
    assert chunked.ledger().to_pylist() == whole.ledger().to_pylist() and whole.ledger().num_rows > 2
    assert chunked.counts == whole.counts
    spilled = chunked.spill(tmp_path / "dedup-00000.parquet")
    assert spilled.ledger_tables == [] and spilled.ledger().to_pylist() == whole.ledger().to_pylist()
