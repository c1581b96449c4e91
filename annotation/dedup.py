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
  normalize``) with locality-sensitive hashing (``datasketch.MinHash``; the bands and rows
  ``datasketch.MinHashLSH`` picks for the threshold; github.com/ekzhu/datasketch) for
  candidates, each confirmed by the exact Jaccard similarity of the two 5-gram sets >=
  ``question_threshold``. Each question's signature is cut into the LSH bands and each band
  kept as one 64-bit digest in a numpy array (``lsh_bands``), not as a MinHash object or an
  index of byte keys per sample: a million questions hold a few dozen megabytes, and two
  questions are candidates exactly when ``MinHashLSH`` would find them (they agree on a
  band), but for 64-bit digest collisions, which only add a candidate the exact check
  then judges. Shingles are made again for the candidates only, and each bucket's pairs are
  scored at once (a sparse product of its shingle incidence), not pair by pair.

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

import hashlib
import io
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import imagehash
import numpy as np
import pyarrow as pa
from scipy.sparse import csr_matrix
from datasketch import MinHash, MinHashLSH
from PIL import Image

from mmcurate.core.config import DedupConfig
from mmcurate.core.errors import MmcurateError
from mmcurate.core.ledger import Decision, ledger_table
from mmcurate.core.stages import Stage, StageContext, StageResult
from mmcurate.core.text import normalize

STAGE = "dedup"
SHINGLE = 5  # characters per question shingle
WITHIN = "this release"
KINDS = ("image", "question", "both")
LEDGER_CHUNK = 65_536  # flags held as Decision objects before they become a LEDGER table
GROUP_BLOCK = 1024  # questions of one LSH bucket compared with the whole bucket at a time


@dataclass(frozen=True)
class Item:
    """One row to compare: where it is, its question and its images' hashes."""

    sample_id: str
    where: str  # WITHIN, or "<benchmark> <version>" of a reference release
    question: str
    hashes: tuple[int, ...]

    @property
    def shingles(self) -> frozenset[str]:
        return shingles(self.question)


@dataclass
class Reference:
    """Rows of a release a user names (or an earlier version), already hashed."""

    name: str  # "<benchmark> <version>"
    items: list[Item] = field(default_factory=list)


def shingles(question: str) -> frozenset[str]:
    text = normalize(question)
    return frozenset(text[i:i + SHINGLE] for i in range(max(1, len(text) - SHINGLE + 1))) if text else frozenset()


def image_hash(data: bytes) -> int | None:
    """The 64-bit perceptual hash of image bytes, or None when they do not decode."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            return int(str(imagehash.phash(image)), 16)
    except (OSError, ValueError, Image.DecompressionBombError):
        return None


def item(sample_id: str, where: str, question: str, images: list[bytes]) -> Item:
    return Item(sample_id, where, question, tuple(h for h in map(image_hash, images) if h is not None))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def _bands(value: int, count: int) -> list[tuple[int, int]]:
    width = -(-64 // count)
    return [(i, (value >> (i * width)) & ((1 << width) - 1)) for i in range(count)]


def image_pairs(items: list[Item], distance: int) -> dict[tuple[int, int], int]:
    """(i, j) with i < j -> the smallest Hamming distance between an image of i and one of j."""
    buckets: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for index, it in enumerate(items):
        for h in set(it.hashes):
            for band in _bands(h, distance + 1):
                buckets[band].append((index, h))
    out: dict[tuple[int, int], int] = {}
    for members in buckets.values():
        for a in range(len(members)):
            for b in range(a + 1, len(members)):
                (i, hi), (j, hj) = members[a], members[b]
                if i == j:
                    continue
                d = bin(hi ^ hj).count("1")
                key = (min(i, j), max(i, j))
                if d <= distance and d < out.get(key, distance + 1):
                    out[key] = d
    return out


def lsh_bands(questions: list[str], threshold: float, num_perm: int) -> tuple[np.ndarray, np.ndarray]:
    """(n x bands) uint64 digests of each question's MinHash bands, and which questions have
    shingles at all (module docstring)."""
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)  # only its choice of bands and rows
    signature = MinHash(num_perm=num_perm)
    bands = np.zeros((len(questions), len(lsh.hashranges)), dtype=np.uint64)
    present = np.zeros(len(questions), dtype=bool)
    for index, question in enumerate(questions):
        grams = shingles(question)
        if not grams:
            continue
        signature.clear()
        signature.update_batch([s.encode("utf-8") for s in grams])
        values = signature.hashvalues
        for band, (start, end) in enumerate(lsh.hashranges):
            digest = hashlib.blake2b(values[start:end].tobytes(), digest_size=8).digest()
            bands[index, band] = int.from_bytes(digest, "little")
        present[index] = True
    return bands, present


def band_groups(bands: np.ndarray, present: np.ndarray) -> Iterator[np.ndarray]:
    """The rows (ascending) that agree on one band, per band and value shared by two rows or more."""
    rows = np.flatnonzero(present)
    for band in range(bands.shape[1]):
        values = bands[rows, band]
        order = np.argsort(values, kind="stable")
        ordered = values[order]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
        ends = np.r_[starts[1:], len(ordered)]
        for start, end in zip(starts[ends - starts > 1], ends[ends - starts > 1]):
            yield np.sort(rows[order[start:end]])


def _group_pairs(members: np.ndarray, items: list[Item], threshold: float, out: dict[tuple[int, int], float]) -> None:
    """Add to ``out`` the pairs of ``members`` whose shingle sets' Jaccard similarity is >= threshold:
    intersections as a sparse product of the members' shingle incidence, ``GROUP_BLOCK`` rows at a
    time (exact integer counts, so each score is the same float ``jaccard`` gives)."""
    grams = [items[i].shingles for i in members]
    vocabulary: dict[str, int] = {}
    columns = [vocabulary.setdefault(g, len(vocabulary)) for gs in grams for g in gs]
    sizes = np.array([len(gs) for gs in grams], dtype=np.int64)
    incidence = csr_matrix((np.ones(len(columns), dtype=np.int64), columns, np.r_[0, np.cumsum(sizes)]),
                           shape=(len(members), len(vocabulary)))
    for start in range(0, len(members), GROUP_BLOCK):
        shared = (incidence[start:start + GROUP_BLOCK] @ incidence.T).toarray()
        scores = shared / (sizes[start:start + GROUP_BLOCK, None] + sizes[None, :] - shared)
        rows, cols = np.nonzero(scores >= threshold)
        for row, col in zip(rows.tolist(), cols.tolist()):
            if col > start + row:
                out[(int(members[start + row]), int(members[col]))] = round(float(scores[row, col]), 4)


def question_pairs(items: list[Item], threshold: float, num_perm: int) -> dict[tuple[int, int], float]:
    """(i, j) with i < j -> the Jaccard similarity of their questions' shingles, when >= threshold
    (candidates: the questions that agree on an LSH band)."""
    bands, present = lsh_bands([it.question for it in items], threshold, num_perm)
    out: dict[tuple[int, int], float] = {}
    for members in band_groups(bands, present):
        _group_pairs(members, items, threshold, out)
    return out


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
        ours = [item(r["sample_id"], WITHIN, r["question"], [ctx.store.read(sha) for sha in _shas(r) if sha in ctx.store])
                for batch in samples.select(self.reads(samples.schema)).to_batches(max_chunksize=4096)
                for r in batch.to_pylist()]
        theirs = [it for ref in self.references for it in ref.items]
        everything = ours + theirs
        images = image_pairs(everything, self.config.image_distance)
        questions = question_pairs(everything, self.config.question_threshold, self.config.num_perm)
        found: dict[tuple[int, int], dict[str, Any]] = {}
        for key, d in images.items():
            found.setdefault(key, {})["image_distance"] = d
        for key, score in questions.items():
            found.setdefault(key, {})["question_jaccard"] = score
        del images, questions
        decisions: list[Decision] = []
        tables: list[pa.Table] = []  # the decisions as LEDGER tables, LEDGER_CHUNK at a time (compact)
        flagged_ids: set[str] = set()
        dropped: set[str] = set()
        summary: dict[tuple[str, str], int] = defaultdict(int)
        for (i, j), evidence in sorted(found.items()):
            if i >= len(ours):
                continue  # two reference rows
            a, b = everything[i], everything[j]
            if b.where != WITHIN and b.sample_id == a.sample_id:
                continue  # the same item in an earlier version
            flagged, other = (b, a) if b.where == WITHIN else (a, b)
            kind = "both" if len(evidence) == 2 else "image" if "image_distance" in evidence else "question"
            drop = self.config.drop and kind == "both"
            dropped |= {flagged.sample_id} if drop else set()
            summary[(other.where, kind)] += 1
            decisions.append(Decision(flagged.sample_id, STAGE, f"dedup.{kind}", "drop" if drop else "flagged",
                                      context_id=other.sample_id, detail={
                                          "of": other.sample_id, "in": other.where, "kind": kind, **evidence,
                                          "reason": f"near-duplicate ({kind}) of {other.sample_id} in {other.where}"}))
            flagged_ids.add(flagged.sample_id)
            if len(decisions) == LEDGER_CHUNK:
                tables.append(ledger_table(decisions, ctx.run_id))
                decisions = []
        if tables:
            tables.append(ledger_table(decisions, ctx.run_id))
            decisions = []
        kept = samples.filter(pa.array([it.sample_id not in dropped for it in ours], type=pa.bool_()))
        table = [{"against": where, "kind": kind, "flagged": summary[(where, kind)]}
                 for where in (WITHIN, *(r.name for r in self.references)) for kind in KINDS]
        counts = {"input": len(ours), "kept": kept.num_rows, "dropped": len(dropped),
                  "flagged": len(flagged_ids)}
        return StageResult(stage=STAGE, kept=kept, decisions=decisions, ledger_tables=tables, run_id=ctx.run_id,
                           counts=counts,
                           extra={"near_duplicates": table, "references": [r.name for r in self.references],
                                  "settings": self.config.model_dump(mode="json", exclude={"against"})},
                           components={"near_duplicates": f"phash<= {self.config.image_distance}, minhash char-"
                                                          f"{SHINGLE}gram jaccard>={self.config.question_threshold}"})


def _image_column(columns: list[str]) -> str:
    for name in ("images", "image"):
        if name in columns:
            return name
    raise MmcurateError("near-duplicate check needs an 'images' or 'image' column")


def _shas(row: dict[str, Any]) -> list[str]:
    value = row.get("images", row.get("image"))
    return [v for v in (value if isinstance(value, list) else [value]) if v]
