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
  normalize``) with locality-sensitive hashing (``datasketch.MinHash``, ``MinHashLSH``;
  github.com/ekzhu/datasketch) for candidates, each confirmed by the exact Jaccard
  similarity of the two 5-gram sets >= ``question_threshold``.

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
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import imagehash
import pyarrow as pa
from datasketch import MinHash, MinHashLSH
from PIL import Image

from mmcurate.core.config import DedupConfig
from mmcurate.core.errors import MmcurateError
from mmcurate.core.ledger import Decision
from mmcurate.core.stages import Stage, StageContext, StageResult
from mmcurate.core.text import normalize

STAGE = "dedup"
SHINGLE = 5  # characters per question shingle
WITHIN = "this release"
KINDS = ("image", "question", "both")


@dataclass(frozen=True)
class Item:
    """One row to compare: where it is, its question shingles and its images' hashes."""

    sample_id: str
    where: str  # WITHIN, or "<benchmark> <version>" of a reference release
    shingles: frozenset[str]
    hashes: tuple[int, ...]


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
    return Item(sample_id, where, shingles(question), tuple(h for h in map(image_hash, images) if h is not None))


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


def question_pairs(items: list[Item], threshold: float, num_perm: int) -> dict[tuple[int, int], float]:
    """(i, j) with i < j -> the Jaccard similarity of their questions' shingles, when >= threshold."""
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    signatures = []
    for index, it in enumerate(items):
        signature = MinHash(num_perm=num_perm)
        signature.update_batch([s.encode("utf-8") for s in it.shingles])
        signatures.append(signature)
        if it.shingles:
            lsh.insert(str(index), signature)
    out: dict[tuple[int, int], float] = {}
    for index, it in enumerate(items):
        if not it.shingles:
            continue
        for other in map(int, lsh.query(signatures[index])):
            key = (min(index, other), max(index, other))
            if other != index and key not in out and (score := jaccard(it.shingles, items[other].shingles)) >= threshold:
                out[key] = round(score, 4)
    return out


@dataclass
class NearDuplicates(Stage):
    """Flag (or with ``config.drop``, drop) near-duplicates (see the module docstring)."""

    config: DedupConfig
    references: list[Reference] = field(default_factory=list)
    name = STAGE
    shardable = False  # compares samples across the whole release

    def run(self, samples: pa.Table, ctx: StageContext) -> StageResult:
        rows = samples.select(["sample_id", "question", _image_column(samples)]).to_pylist()
        ours = [item(r["sample_id"], WITHIN, r["question"], [ctx.store.read(sha) for sha in _shas(r) if sha in ctx.store])
                for r in rows]
        theirs = [it for ref in self.references for it in ref.items]
        everything = ours + theirs
        images = image_pairs(everything, self.config.image_distance)
        questions = question_pairs(everything, self.config.question_threshold, self.config.num_perm)
        found: dict[tuple[int, int], dict[str, Any]] = {}
        for key, d in images.items():
            found.setdefault(key, {})["image_distance"] = d
        for key, score in questions.items():
            found.setdefault(key, {})["question_jaccard"] = score
        decisions: list[Decision] = []
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
        kept = samples.filter(pa.array([r["sample_id"] not in dropped for r in rows], type=pa.bool_()))
        table = [{"against": where, "kind": kind, "flagged": summary[(where, kind)]}
                 for where in (WITHIN, *(r.name for r in self.references)) for kind in KINDS]
        counts = {"input": len(rows), "kept": kept.num_rows, "dropped": len(dropped),
                  "flagged": len({d.sample_id for d in decisions})}
        return StageResult(stage=STAGE, kept=kept, decisions=decisions, run_id=ctx.run_id, counts=counts,
                           extra={"near_duplicates": table, "references": [r.name for r in self.references],
                                  "settings": self.config.model_dump(mode="json", exclude={"against"})},
                           components={"near_duplicates": f"phash<= {self.config.image_distance}, minhash char-"
                                                          f"{SHINGLE}gram jaccard>={self.config.question_threshold}"})


def _image_column(samples: pa.Table) -> str:
    for name in ("images", "image"):
        if name in samples.column_names:
            return name
    raise MmcurateError("near-duplicate check needs an 'images' or 'image' column")


def _shas(row: dict[str, Any]) -> list[str]:
    value = row.get("images", row.get("image"))
    return [v for v in (value if isinstance(value, list) else [value]) if v]
