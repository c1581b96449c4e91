"""Near-duplicates and leakage: samples whose question or image nearly repeats another one,
within the release, against its earlier versions, and against releases a user names (another
benchmark, a training set checked for contamination). Shared by every benchmark: it runs
last, on the rows a release will hold.

- Images: 64-bit perceptual hashes (``imagehash.phash``, DCT of a 32x32 greyscale; the
  ImageHash library, github.com/JohannesBuchner/imagehash); two images are near-duplicates
  at Hamming distance <= ``image_distance``. Candidates come from splitting each hash into
  ``image_distance + 1`` bands (by the pigeonhole principle a pair within the distance agrees
  on one band), so no step compares every pair.
- Questions: MinHash over character 5-grams of the normalised question (``core.text.
  normalize``) with locality-sensitive hashing (``datasketch.MinHash``'s signature; the bands and
  rows ``datasketch.MinHashLSH`` picks for the threshold; github.com/ekzhu/datasketch) for
  candidates, each confirmed by the exact Jaccard similarity of the two 5-gram sets >=
  ``question_threshold``. Each question is normalised and shingled once (``shingled``): its
  shingles become a row of one sparse incidence matrix of the pool (a column per distinct
  shingle), and its signature is datasketch's, computed for ``SIGNATURE_ROWS`` questions at a time
  (each distinct shingle hashed once, not once per question holding it). Each band of the
  signature is kept as one 64-bit digest in a numpy array, not as a MinHash object or an index of
  byte keys per sample: a million questions hold a few dozen megabytes, and two questions are
  candidates exactly when ``MinHashLSH`` would find them (they agree on a band), but for 64-bit
  digest collisions, which only add a candidate the exact check then judges. A large bucket's
  pairs are scored a block at a time (a sparse product of its rows of the incidence, at most
  ``GROUP_CELLS`` pairs a block: a bucket grows with the pool), not pair by pair; a band's small
  buckets (at most ``SMALL_BUCKET`` questions: most hold two or three) are scored together, every
  pair within a bucket listed and ``SMALL_PAIRS`` scored at a time.
- Memory: the rows are held column by column (``Items``: Arrow strings for ids and questions,
  numpy arrays for image hashes) and the pairs found as numpy arrays (``Pairs``), not as an
  object or a dictionary entry per row or pair, so a pool of a million stays within about a
  gigabyte, most of it the question check's incidence matrix and shingle vocabulary (402 MB over
  593k questions: ``bench/peers/minhash.py``); the flags are spilled to the run's ledger parts
  ``LEDGER_CHUNK`` at a time.

A pair is recorded once, on the later sample (release order) for pairs within the release,
on the release's sample for pairs with a reference; a reference row with the same sample id
is the same item (an earlier version holds it), never a duplicate. Kinds: ``image``,
``question``, ``both`` (question and image). Filters never delete: every flag is a ledger
row (stage ``dedup``, check ``dedup.<kind>``, ``context_id`` = the other sample, detail:
where it is, the distance or similarity); with ``drop`` the samples flagged ``both`` (the
same item asked again) are dropped with verdict ``drop``; the rest stay flagged. A sample
that shares only an image with another is common and legitimate (several questions about
one picture), so an image match alone never drops anything.
"""

from __future__ import annotations

import io
from array import array
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import imagehash
import numpy as np
import pyarrow as pa
from datasketch import MinHash, MinHashLSH
from datasketch.hashfunc import sha1_hash32
from PIL import Image
from scipy.sparse import csr_matrix

from mmcurate.core.config import DedupConfig
from mmcurate.core.errors import MmcurateError
from mmcurate.core.ledger import Decision, Ledger, ledger_table
from mmcurate.core.stages import Stage, StageContext, StageResult
from mmcurate.core.text import normalize

STAGE = "dedup"
SHINGLE = 5  # characters per question shingle
WITHIN = "this release"
KINDS = ("image", "question", "both")
LEDGER_CHUNK = 65_536  # flags held as Decision objects before they are spilled as a ledger part
GROUP_CELLS = 1 << 20  # question pairs of one LSH bucket scored at a time (a block of rows against the bucket)
SMALL_BUCKET = 64  # LSH buckets of at most this many questions are scored together, their pairs listed
SMALL_PAIRS = 1 << 16  # pairs of small buckets scored at a time (their rows' shingle incidence taken twice)
SIGNATURE_ROWS = 2048  # questions whose MinHash signatures are computed at a time (their shingles x num_perm held)


@dataclass(frozen=True)
class Items:
    """Rows to compare, held column by column: a million rows are a few arrays, not a million
    objects (their ids and questions stay Arrow strings; a row's images are its perceptual hashes)."""

    sample_ids: pa.Array
    questions: pa.Array
    hash_rows: np.ndarray  # int64: the row each hash belongs to (a row holds any number of images)
    hash_values: np.ndarray  # uint64

    def __len__(self) -> int:
        return len(self.sample_ids)


@dataclass(frozen=True)
class Reference:
    """Rows of a release a user names (or an earlier version), already hashed."""

    name: str  # "<benchmark> <version>"
    items: Items


@dataclass(frozen=True)
class Pairs:
    """Pairs (first[k], second[k]) of rows, first < second, sorted, each with its value."""

    first: np.ndarray
    second: np.ndarray
    values: np.ndarray

    @property
    def keys(self) -> np.ndarray:
        """One int64 per pair, ordered as (first, second) are (``pair_keys``)."""
        return pair_keys(self.first, self.second)


def pair_keys(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    return (first.astype(np.int64) << 32) | second.astype(np.int64)


def shingles(question: str) -> frozenset[str]:
    """The shingles of a question: ``grams`` of its normalised form."""
    return grams(normalize(question))


def grams(text: str) -> frozenset[str]:
    """The character ``SHINGLE``-grams of a normalised text (a shorter one is its own gram)."""
    return frozenset(text[i : i + SHINGLE] for i in range(max(1, len(text) - SHINGLE + 1))) if text else frozenset()


def image_hash(data: bytes) -> int | None:
    """The 64-bit perceptual hash of image bytes, or None when they do not decode."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            return int(str(imagehash.phash(image)), 16)
    except (OSError, ValueError, Image.DecompressionBombError):
        return None


def items(chunks: Iterable[tuple[pa.Array, pa.Array, Iterable[Iterable[bytes]]]]) -> Items:
    """Items from chunks of (sample ids, questions, each row's image bytes); an image that does
    not decode has no hash (it cannot match)."""
    ids: list[pa.Array] = []
    questions: list[pa.Array] = []
    rows: list[int] = []
    values: list[int] = []
    offset = 0
    for chunk_ids, chunk_questions, images in chunks:
        ids.append(chunk_ids)
        questions.append(chunk_questions)
        for row, row_images in enumerate(images, offset):
            for h in {h for h in map(image_hash, row_images) if h is not None}:
                rows.append(row)
                values.append(h)
        offset += len(chunk_ids)
    return Items(_concat(ids), _concat(questions), np.array(rows, dtype=np.int64), np.array(values, dtype=np.uint64))


def concat(parts: list[Items]) -> Items:
    """The rows of ``parts`` one after the other."""
    offsets = np.cumsum([0, *map(len, parts)])[:-1]
    return Items(
        _concat([p.sample_ids for p in parts]),
        _concat([p.questions for p in parts]),
        np.concatenate([p.hash_rows + o for p, o in zip(parts, offsets)] or [np.zeros(0, np.int64)]),
        np.concatenate([p.hash_values for p in parts] or [np.zeros(0, np.uint64)]),
    )


def _concat(arrays: list[pa.Array]) -> pa.Array:
    return pa.concat_arrays([a.cast(pa.large_string()) for a in arrays]) if arrays else pa.array([], pa.large_string())


def _runs(values: np.ndarray) -> Iterator[np.ndarray]:
    """Per value held by two positions or more, those positions of ``values`` (ascending)."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], len(ordered)]
    for start, end in zip(starts[ends - starts > 1], ends[ends - starts > 1]):
        yield np.sort(order[start:end])


def _unique_pairs(
    first: list[np.ndarray], second: list[np.ndarray], values: list[np.ndarray], smallest: bool, dtype: type
) -> Pairs:
    """The pairs found (a pair may be found in several bands), each once, sorted; with ``smallest``
    the pair's smallest value, else its first."""
    if not first:
        return Pairs(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, dtype))
    i, j, v = np.concatenate(first), np.concatenate(second), np.concatenate(values)
    keys = pair_keys(i, j)
    order = np.lexsort((v, keys)) if smallest else np.argsort(keys, kind="stable")
    keys, i, j, v = keys[order], i[order], j[order], v[order]
    first_of_key = np.ones(len(keys), dtype=bool)
    first_of_key[1:] = keys[1:] != keys[:-1]
    return Pairs(i[first_of_key], j[first_of_key], v[first_of_key].astype(dtype))


def image_pairs(rows: np.ndarray, hashes: np.ndarray, distance: int) -> Pairs:
    """Rows (i < j) with images within ``distance`` bits, valued by the smallest Hamming distance
    between an image of i and one of j (``hashes[k]`` belongs to row ``rows[k]``)."""
    count = distance + 1
    width = -(-64 // count)
    found_i: list[np.ndarray] = []
    found_j: list[np.ndarray] = []
    found_d: list[np.ndarray] = []
    for band in range(count):
        values = (hashes >> np.uint64(band * width)) & np.uint64((1 << width) - 1)
        for members in _runs(values):
            a, b = np.triu_indices(len(members), 1)
            left, right = members[a], members[b]
            d = np.bitwise_count(hashes[left] ^ hashes[right]).astype(np.int64)
            keep = (d <= distance) & (rows[left] != rows[right])
            i, j = rows[left][keep], rows[right][keep]
            found_i.append(np.minimum(i, j))
            found_j.append(np.maximum(i, j))
            found_d.append(d[keep])
    return _unique_pairs(found_i, found_j, found_d, True, np.int64)


@dataclass(frozen=True)
class Shingled:
    """Texts as the question check reads them: each text's MinHash LSH band digests (``n x bands``
    uint64) and its shingles as one row of a sparse incidence matrix (``n x distinct shingles``, int32
    ones), made once for the candidates' exact check in every band."""

    bands: np.ndarray
    incidence: csr_matrix
    sizes: np.ndarray  # int64: shingles per text (0: nothing to compare)


def shingled(texts: Iterable[str], n: int, threshold: float, num_perm: int) -> Shingled:
    """``Shingled`` of the ``n`` normalised ``texts``. The signatures are datasketch's (its
    ``affine32`` scheme: ``sha1_hash32`` of each shingle, the MurmurHash3 finalizer, then ``a * h + b``
    mod 2^32 with ``MinHash(num_perm).permutations``, the minimum over the shingles), computed
    ``SIGNATURE_ROWS`` texts at a time: each distinct shingle is hashed once in all, permuted once per
    batch it occurs in, and each text takes one minimum over its rows."""
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)  # only its choice of bands and rows
    a, b = _permutations(num_perm)
    bands = np.zeros((n, len(lsh.hashranges)), dtype=np.uint64)
    vocabulary: dict[str, int] = {}  # each distinct shingle's column
    hashed = array("I")  # sha1_hash32 of each column's shingle
    columns: list[np.ndarray] = []
    sizes = np.zeros(n, dtype=np.int64)
    batch: list[str] = []
    for index, text in enumerate(texts, 1):
        batch.append(text)
        if len(batch) < SIGNATURE_ROWS and index < n:
            continue
        sets = [grams(t) for t in batch]
        first, counts = index - len(batch), np.array([len(s) for s in sets], dtype=np.int64)
        batch = []
        local: dict[str, int] = {}
        codes = np.array([local.setdefault(g, len(local)) for s in sets for g in s], dtype=np.int64)
        column = np.empty(len(local), dtype=np.int64)
        for k, gram in enumerate(local):
            if (code := vocabulary.get(gram)) is None:
                code = vocabulary[gram] = len(vocabulary)
                hashed.append(sha1_hash32(gram.encode("utf-8")))
            column[k] = code
        sizes[first:index] = counts
        columns.append(column[codes].astype(np.int32))
        if not len(codes):
            continue
        values = np.frombuffer(hashed, dtype=np.uint32)[column]
        permuted = _fmix32(values)[:, None] * a[None, :] + b[None, :]
        signatures = np.minimum.reduceat(permuted[codes], np.r_[0, np.cumsum(counts)[:-1]][counts > 0], axis=0)
        bands[first + np.flatnonzero(counts > 0)] = _digests(signatures, lsh.hashranges)
    indices = np.concatenate(columns) if columns else np.zeros(0, np.int32)
    incidence = csr_matrix(
        (np.ones(len(indices), dtype=np.int32), indices, np.r_[0, np.cumsum(sizes)]), shape=(n, len(vocabulary))
    )
    return Shingled(bands, incidence, sizes)


def _permutations(num_perm: int) -> tuple[np.ndarray, np.ndarray]:
    signature = MinHash(num_perm=num_perm)
    if signature.scheme != "affine32":
        raise MmcurateError(
            f"datasketch's default MinHash scheme is {signature.scheme!r}, not 'affine32': "
            "the near-duplicate stage needs datasketch 2.x"
        )
    a, b = signature.permutations
    return a.astype(np.uint32), b.astype(np.uint32)


def _fmix32(values: np.ndarray) -> np.ndarray:
    """The MurmurHash3 32-bit finalizer (datasketch's pre-mix of each shingle's hash)."""
    values = values ^ (values >> np.uint32(16))
    values = values * np.uint32(0x85EBCA6B)
    values = values ^ (values >> np.uint32(13))
    values = values * np.uint32(0xC2B2AE35)
    return values ^ (values >> np.uint32(16))


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _digests(signatures: np.ndarray, ranges: list[tuple[int, int]]) -> np.ndarray:
    """One 64-bit digest per row and band of uint32 ``signatures``: the band's values folded in
    order (xor, multiply by an odd constant, shift-xor) and then the MurmurHash3 64-bit finalizer;
    rows equal on a band have equal digests, and unequal rows rarely do (a collision only adds a
    candidate the exact check judges)."""
    out = np.empty((len(signatures), len(ranges)), dtype=np.uint64)
    for band, (start, end) in enumerate(ranges):
        digest = np.full(len(signatures), band + 1, dtype=np.uint64) * _GOLDEN
        for column in range(start, end):
            digest = (digest ^ signatures[:, column].astype(np.uint64)) * np.uint64(0x100000001B3)
            digest ^= digest >> np.uint64(29)
        digest ^= digest >> np.uint64(33)
        digest *= np.uint64(0xFF51AFD7ED558CCD)
        digest ^= digest >> np.uint64(33)
        digest *= np.uint64(0xC4CEB9FE1A85EC53)
        out[:, band] = digest ^ (digest >> np.uint64(33))
    return out


def _group_pairs(members: np.ndarray, pool: Shingled, threshold: float) -> tuple[np.ndarray, ...]:
    """The pairs of ``members`` whose shingle sets' Jaccard similarity is >= threshold, with it:
    intersections as a sparse product of the members' shingle incidence, a block of rows against the
    whole bucket at a time, at most ``GROUP_CELLS`` pairs per block (buckets grow with the pool, the
    block's dense scores must not) (exact integer counts, so each score is the same float as
    |A & B| / |A | B|)."""
    rows = pool.incidence[members]
    used, columns = np.unique(rows.indices, return_inverse=True)  # the bucket's own shingles: a product's cost
    incidence = csr_matrix((rows.data, columns, rows.indptr), shape=(len(members), len(used)))  # grows with them
    sizes = pool.sizes[members]
    out_i, out_j, out_s = [], [], []
    block = max(1, GROUP_CELLS // len(members))
    for start in range(0, len(members), block):
        shared = (incidence[start : start + block] @ incidence.T).toarray()
        scores = shared / (sizes[start : start + block, None] + sizes[None, :] - shared)
        rows, cols = np.nonzero(
            (scores >= threshold) & (np.arange(len(members))[None, :] > start + np.arange(shared.shape[0])[:, None])
        )
        out_i.append(members[start + rows])
        out_j.append(members[cols])
        out_s.append(scores[rows, cols])
    return np.concatenate(out_i), np.concatenate(out_j), np.concatenate(out_s)


def _small_group_pairs(groups: list[np.ndarray], pool: Shingled, threshold: float) -> tuple[np.ndarray, ...]:
    """``_group_pairs`` of many small ``groups`` (each sorted) at once: every pair within a group listed
    (groups of the same size together) and scored ``SMALL_PAIRS`` at a time as the row-wise product of
    its two rows' incidence. Most LSH buckets hold two or three questions, and scoring each alone (its
    own matrix and product) cost more than the scores; these are the same floats (exact integer counts)."""
    members = np.concatenate(groups)
    lengths = np.array([len(g) for g in groups])
    starts = np.r_[0, np.cumsum(lengths)[:-1]]
    out_i, out_j, out_s = [], [], []
    for size in np.unique(lengths).tolist():
        a, b = np.triu_indices(size, 1)
        base = starts[lengths == size][:, None]
        left, right = members[(base + a).ravel()], members[(base + b).ravel()]
        for start in range(0, len(left), SMALL_PAIRS):
            i, j = left[start : start + SMALL_PAIRS], right[start : start + SMALL_PAIRS]
            shared = np.asarray(pool.incidence[i].multiply(pool.incidence[j]).sum(axis=1)).ravel()
            scores = shared / (pool.sizes[i] + pool.sizes[j] - shared)
            keep = scores >= threshold
            out_i.append(i[keep])
            out_j.append(j[keep])
            out_s.append(scores[keep])
    return np.concatenate(out_i), np.concatenate(out_j), np.concatenate(out_s)


def question_pairs(questions: pa.Array, threshold: float, num_perm: int) -> Pairs:
    """Rows (i < j) whose questions' shingle sets have Jaccard similarity >= threshold, valued by it
    (candidates: the questions that agree on an LSH band; a band's buckets of at most ``SMALL_BUCKET``
    questions scored together, a larger one on its own; the pairs found are made unique band by
    band, so a pair found in every band is held once)."""
    texts = (normalize(q) for q in _strings(questions))
    pool = shingled(texts, len(questions), threshold, num_perm)
    rows = np.flatnonzero(pool.sizes > 0)
    found = _unique_pairs([], [], [], False, np.float64)
    for band in range(pool.bands.shape[1]):
        buckets = [rows[members] for members in _runs(pool.bands[rows, band])]
        small = [bucket for bucket in buckets if len(bucket) <= SMALL_BUCKET]
        pairs = [_group_pairs(bucket, pool, threshold) for bucket in buckets if len(bucket) > SMALL_BUCKET]
        pairs += [_small_group_pairs(small, pool, threshold)] if small else []
        found = _unique_pairs(
            [found.first, *(p[0] for p in pairs)],
            [found.second, *(p[1] for p in pairs)],
            [found.values, *(p[2] for p in pairs)],
            False,
            np.float64,
        )
    return found


def _strings(array: pa.Array, chunk: int = 65_536) -> Iterator[str]:
    for start in range(0, len(array), chunk):
        yield from array.slice(start, chunk).to_pylist()


@dataclass
class NearDuplicates(Stage):
    """Flag (or with ``config.drop``, drop) near-duplicates (see the module docstring)."""

    config: DedupConfig
    references: list[Reference] = field(default_factory=list)
    name = STAGE
    shardable = False  # compares samples across the whole release

    def reads(self, schema: pa.Schema) -> list[str]:
        return ["sample_id", "question", _image_column(schema.names)]

    def run(self, samples: pa.Table, ctx: StageContext) -> StageResult:
        column = _image_column(samples.schema.names)

        def images(batch: pa.RecordBatch) -> Iterator[list[bytes]]:
            for value in batch.column(column).to_pylist():
                yield [ctx.store.read(sha) for sha in _shas(value) if sha in ctx.store]

        ours = items(
            (batch.column("sample_id"), batch.column("question"), images(batch))
            for batch in samples.select(self.reads(samples.schema)).to_batches(max_chunksize=4096)
        )
        n = len(ours)
        parts = [ours, *(ref.items for ref in self.references)]
        everything = concat(parts)
        names = [WITHIN, *(ref.name for ref in self.references)]
        ends = np.cumsum([len(part) for part in parts])
        images_found = image_pairs(everything.hash_rows, everything.hash_values, self.config.image_distance)
        questions_found = question_pairs(everything.questions, self.config.question_threshold, self.config.num_perm)
        image_keys, question_keys = images_found.keys, questions_found.keys
        keys = np.union1d(image_keys, question_keys)
        keys = keys[(keys >> 32) < n]  # two reference rows are not this release's business
        flagged = np.zeros(n, dtype=bool)
        dropped = np.zeros(n, dtype=bool)
        summary: dict[tuple[str, str], int] = defaultdict(int)
        spilled: list[Path] = []  # the decisions spilled LEDGER_CHUNK at a time (a million flags stay on disk)
        decisions: list[Decision] = []
        for start in range(0, len(keys), LEDGER_CHUNK):
            chunk = keys[start : start + LEDGER_CHUNK]
            first, second = chunk >> 32, chunk & 0xFFFFFFFF
            distances = _values_at(image_keys, images_found.values, chunk)
            jaccards = _values_at(question_keys, questions_found.values, chunk)
            first_ids = everything.sample_ids.take(pa.array(first)).to_pylist()
            second_ids = everything.sample_ids.take(pa.array(second)).to_pylist()
            wheres = [names[w] for w in np.searchsorted(ends, second, side="right").tolist()]
            for i, j, a, b, where, d, score in zip(
                first.tolist(), second.tolist(), first_ids, second_ids, wheres, distances.tolist(), jaccards.tolist()
            ):
                if where != WITHIN and a == b:
                    continue  # the same item in an earlier version
                row, flagged_id, other, other_where = (j, b, a, WITHIN) if where == WITHIN else (i, a, b, where)
                evidence = {
                    **({"image_distance": int(d)} if d >= 0 else {}),
                    **({"question_jaccard": round(score, 4)} if score >= 0 else {}),
                }
                kind = "both" if len(evidence) == 2 else "image" if d >= 0 else "question"
                drop = self.config.drop and kind == "both"
                dropped[row] |= drop
                flagged[row] = True
                summary[(other_where, kind)] += 1
                decisions.append(
                    Decision(
                        flagged_id,
                        STAGE,
                        f"dedup.{kind}",
                        "drop" if drop else "flagged",
                        context_id=other,
                        detail={
                            "of": other,
                            "in": other_where,
                            "kind": kind,
                            **evidence,
                            "reason": f"near-duplicate ({kind}) of {other} in {other_where}",
                        },
                    )
                )
                if len(decisions) == LEDGER_CHUNK:
                    part = ctx.ledger_dir / f"{STAGE}-flags-{len(spilled):05d}.parquet"
                    spilled.append(Ledger([ledger_table(decisions, ctx.run_id)]).write(part))
                    decisions = []
        kept = samples.filter(pa.array(~dropped))
        table = [
            {"against": where, "kind": kind, "flagged": summary[(where, kind)]} for where in names for kind in KINDS
        ]
        counts = {"input": n, "kept": kept.num_rows, "dropped": int(dropped.sum()), "flagged": int(flagged.sum())}
        return StageResult(
            stage=STAGE,
            kept=kept,
            decisions=decisions,
            ledger_parts=spilled,
            run_id=ctx.run_id,
            counts=counts,
            extra={
                "near_duplicates": table,
                "references": [r.name for r in self.references],
                "settings": self.config.model_dump(mode="json", exclude={"against"}),
            },
            components={
                "near_duplicates": f"phash<= {self.config.image_distance}, minhash char-"
                f"{SHINGLE}gram jaccard>={self.config.question_threshold}"
            },
        )


def _values_at(keys: np.ndarray, values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """``values`` of the sorted ``keys`` at each of ``wanted``, -1 where a key is absent."""
    if not len(keys):
        return np.full(len(wanted), -1.0)
    at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    return np.where(keys[at] == wanted, values[at], -1).astype(np.float64)


def _image_column(columns: list[str]) -> str:
    for name in ("images", "image"):
        if name in columns:
            return name
    raise MmcurateError("near-duplicate check needs an 'images' or 'image' column")


def _shas(value: Any) -> list[str]:
    return [v for v in (value if isinstance(value, list) else [value]) if v]
