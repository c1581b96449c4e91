"""Near-duplicate questions from numpy LSH bands (issue 36 item 2): the pairs are exactly those
datasketch's MinHashLSH index finds and the exact Jaccard confirms, with no MinHash object or
byte key held per question."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
from datasketch import MinHash, MinHashLSH

from mmcurate.annotation import dedup
from mmcurate.annotation.dedup import question_pairs, shingled, shingles
from mmcurate.core.text import normalize


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
# (small bucket, pairs, signature rows): every bucket alone; the defaults; every bucket with the others, a
# few pairs and signatures at a time
@pytest.mark.parametrize(
    "small", [(0, 1, 7), (dedup.SMALL_BUCKET, dedup.SMALL_PAIRS, dedup.SIGNATURE_ROWS), (10_000, 3, 7)]
)
def test_band_pairs_are_the_index_pairs(threshold: float, cells: int, small: tuple[int, int, int], monkeypatch):
    monkeypatch.setattr(dedup, "GROUP_CELLS", cells)
    for name, value in zip(("SMALL_BUCKET", "SMALL_PAIRS", "SIGNATURE_ROWS"), small):
        monkeypatch.setattr(dedup, name, value)
    questions = _questions(1500)
    expected = _index_pairs(questions, threshold, 128)
    assert expected  # the questions hold near-duplicates to find
    pairs = question_pairs(pa.array(questions), threshold, 128)
    assert dict(zip(zip(pairs.first.tolist(), pairs.second.tolist()), pairs.values.tolist())) == expected


def test_each_question_is_shingled_once_and_scored_from_one_incidence(monkeypatch):
    """Issue 47 item 2: the exact check made each question's shingles again in every band it had a
    candidate in (3.4 times a question on the curation bench's pool, most of the stage's time), and
    scored each bucket from its own vocabulary. Now each question is normalised and shingled once, and
    every band's buckets are scored from one incidence matrix of the pool."""
    calls = {"grams": 0, "csr": 0}
    real_grams, real_csr = dedup.grams, dedup.csr_matrix

    def counted_grams(text: str) -> frozenset[str]:
        calls["grams"] += 1
        return real_grams(text)

    def counted_csr(*args, **kwargs):
        calls["csr"] += 1
        return real_csr(*args, **kwargs)

    monkeypatch.setattr(dedup, "grams", counted_grams)
    monkeypatch.setattr(dedup, "csr_matrix", counted_csr)
    questions = [f"What colour is the kite in listing {n} (code U{n % 97})?" for n in range(400)]
    pairs = question_pairs(pa.array(questions), 0.8, 128)
    assert len(pairs.first) and calls == {"grams": 400, "csr": 1}


def test_signatures_are_datasketchs():
    """The bands are cut from the MinHash signature datasketch computes for the same shingles (its
    default scheme, the same permutations), batch or no batch."""
    texts = [normalize(q) for q in _questions(300)]
    lsh = MinHashLSH(threshold=0.8, num_perm=128)
    expected = []
    for text in texts:
        signature = MinHash(num_perm=128)
        signature.update_batch([g.encode("utf-8") for g in dedup.grams(text)])
        expected.append(signature.hashvalues)
    digests = dedup._digests(np.array(expected, dtype=np.uint32), lsh.hashranges)
    present = np.array([bool(t) for t in texts])
    for rows in (dedup.SIGNATURE_ROWS, 7):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(dedup, "SIGNATURE_ROWS", rows)
            found = shingled(iter(texts), len(texts), 0.8, 128)
        assert (found.sizes > 0).tolist() == present.tolist() and not present.all()
        assert (found.bands[present] == digests[present]).all() and not found.bands[~present].any()
        assert found.incidence.sum(axis=1).A1.tolist() == [len(dedup.grams(t)) for t in texts]


def test_bands_are_a_small_array_per_question():
    found = shingled(["what colour is kite", "", "what colour is kite"], 3, 0.8, 128)
    assert found.bands.shape == (3, MinHashLSH(threshold=0.8, num_perm=128).b) and found.bands.dtype.name == "uint64"
    assert (found.sizes > 0).tolist() == [True, False, True] and (found.bands[0] == found.bands[2]).all()


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
