"""Near-duplicate questions from numpy LSH bands (issue 36 item 2): the pairs are exactly those
datasketch's MinHashLSH index finds and the exact Jaccard confirms, with no MinHash object or
byte key held per question."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from datasketch import MinHash, MinHashLSH

from mmcurate.annotation import dedup
from mmcurate.annotation.dedup import lsh_bands, question_pairs, shingles


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def _index_pairs(questions: list[str], threshold: float, num_perm: int) -> dict[tuple[int, int], float]:
    """The pairs as a MinHashLSH index over one MinHash per question finds them."""
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    grams = [shingles(q) for q in questions]
    signatures = []
    for index, gs in enumerate(grams):
        signature = MinHash(num_perm=num_perm)
        signature.update_batch([s.encode("utf-8") for s in gs])
        signatures.append(signature)
        if gs:
            lsh.insert(str(index), signature)
    out = {}
    for index, gs in enumerate(grams):
        if not gs:
            continue
        for other in map(int, lsh.query(signatures[index])):
            key = (min(index, other), max(index, other))
            if other != index and key not in out and (score := jaccard(gs, grams[other])) >= threshold:
                out[key] = score
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
@pytest.mark.parametrize("cells", [dedup.GROUP_CELLS, 7])  # 7: a bucket is scored a row or two at a time
# (small bucket, rows, pairs): every bucket alone; the defaults; every bucket with the others, a few rows
# and pairs at a time
@pytest.mark.parametrize(
    "small", [(0, 1, 1), (dedup.SMALL_BUCKET, dedup.SMALL_ROWS, dedup.SMALL_PAIRS), (10_000, 5, 3)]
)
def test_band_pairs_are_the_index_pairs(threshold: float, cells: int, small: tuple[int, int, int], monkeypatch):
    monkeypatch.setattr(dedup, "GROUP_CELLS", cells)
    for name, value in zip(("SMALL_BUCKET", "SMALL_ROWS", "SMALL_PAIRS"), small):
        monkeypatch.setattr(dedup, name, value)
    questions = _questions(1500)
    expected = _index_pairs(questions, threshold, 128)
    assert expected  # the questions hold near-duplicates to find
    pairs = question_pairs(pa.array(questions), threshold, 128)
    assert dict(zip(zip(pairs.first.tolist(), pairs.second.tolist()), pairs.values.tolist())) == expected


def test_small_buckets_are_scored_together(monkeypatch):
    """Issue 47 item 2: most LSH buckets hold two or three questions; scoring each alone (its own
    vocabulary and sparse matrix) made mmcurate's stage slower than datasketch's index on the curation
    bench's pool. A band's small buckets now share one incidence matrix (a few while the pool is large)."""
    built = []
    real = dedup.csr_matrix
    monkeypatch.setattr(dedup, "csr_matrix", lambda *args, **kwargs: built.append(1) or real(*args, **kwargs))
    questions = [f"What colour is the kite in listing {n} (code U{n % 97})?" for n in range(400)]
    bands, present = lsh_bands(questions, len(questions), 0.8, 128)
    buckets = sum(len(list(dedup._runs(bands[:, band]))) for band in range(bands.shape[1]))
    assert buckets > 4 * bands.shape[1]  # many small buckets per band
    pairs = question_pairs(pa.array(questions), 0.8, 128)
    assert len(pairs.first) and len(built) <= bands.shape[1]


def test_bands_are_a_small_array_per_question():
    bands, present = lsh_bands(["What colour is the kite?", "", "What colour is the kite?"], 3, 0.8, 128)
    assert bands.shape == (3, MinHashLSH(threshold=0.8, num_perm=128).b) and bands.dtype.name == "uint64"
    assert present.tolist() == [True, False, True] and (bands[0] == bands[2]).all()


def test_flags_spilled_as_ledger_parts_are_the_same_rows(tmp_path, monkeypatch):
    """Many flags are spilled to the run's ledger parts ``LEDGER_CHUNK`` at a time: the same rows,
    in the same order, in the stage's ledger and after the part a shard spills."""
    import pyarrow as pa

    from mmcurate.annotation import dedup
    from mmcurate.core.config import DedupConfig, Settings
    from mmcurate.core.images import ImageStore
    from mmcurate.core.stages import StageContext

    questions = [f"In what year was telescope number {n // 4} launched into orbit{'?' * (n % 2)}" for n in range(60)]
    table = pa.table({"sample_id": [f"s{i}" for i in range(60)], "question": questions, "images": [[]] * 60})
    ctx = StageContext(Settings(workdir=tmp_path), "run", ImageStore(tmp_path / "images"))
    whole = dedup.NearDuplicates(DedupConfig()).run(table, ctx)
    monkeypatch.setattr(dedup, "LEDGER_CHUNK", 2)
    chunked = dedup.NearDuplicates(DedupConfig()).run(table, ctx)
    assert whole.ledger_parts == [] and len(chunked.ledger_parts) > 2 and len(chunked.decisions) < 2
    assert all(p.parent == ctx.ledger_dir for p in chunked.ledger_parts)
    assert chunked.ledger().to_pylist() == whole.ledger().to_pylist() and whole.ledger().num_rows > 2
    assert chunked.counts == whole.counts
    spilled = chunked.spill(tmp_path / "dedup-00000.parquet")
    assert (
        spilled.ledger_parts[:-1] == chunked.ledger_parts and spilled.ledger().to_pylist() == whole.ledger().to_pylist()
    )
