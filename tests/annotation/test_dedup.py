"""Near-duplicates and leakage (annotation/dedup.py): perceptual hashes for images, MinHash
with an exact Jaccard check for questions, within a release and against references; flags
are ledger rows, and only a question-and-image match is dropped when asked."""

from __future__ import annotations

import io
import json
import random

import numpy as np
import pyarrow as pa
import pytest
from PIL import Image, ImageDraw

from mmcurate.annotation.dedup import NearDuplicates, Reference, image_pairs, items
from mmcurate.core.config import DedupConfig, Settings
from mmcurate.core.images import ImageStore
from mmcurate.core.stages import StageContext

HUBBLE = "In what year was the Hubble Space Telescope launched?"


def picture(seed: int, shift: int = 0) -> bytes:
    """A 128x128 picture of a few shapes (``seed``); ``shift`` brightens it slightly (a near-copy)."""
    rng = random.Random(seed)
    image = Image.new("RGB", (128, 128), (20 + shift, 30 + shift, 40 + shift))
    draw = ImageDraw.Draw(image)
    for _ in range(6):
        x, y = rng.randrange(0, 96), rng.randrange(0, 96)
        draw.ellipse((x, y, x + 32, y + 32), fill=tuple(min(255, rng.randrange(80, 255) + shift) for _ in range(3)))
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=90)
    return out.getvalue()


@pytest.fixture
def store(tmp_path) -> ImageStore:
    return ImageStore(tmp_path / "images")


def run(store: ImageStore, rows: list[tuple[str, str, bytes]], config: DedupConfig, references=()):
    table = pa.table(
        {
            "sample_id": [r[0] for r in rows],
            "question": [r[1] for r in rows],
            "images": [[store.put(r[2])] for r in rows],
        }
    )
    ctx = StageContext(Settings(), "run", store)
    return NearDuplicates(config, list(references)).run(table, ctx)


def flags(result) -> set[tuple[str, str, str, str]]:
    return {(r["sample_id"], r["check"], r["verdict"], r["context_id"]) for r in result.ledger().to_pylist()}


def test_within_a_release_the_later_sample_is_flagged_by_kind(store):
    rows = [
        ("a", HUBBLE, picture(1)),
        ("b", HUBBLE.replace("Space Telescope", "space telescope").rstrip("?"), picture(1, shift=6)),
        ("c", "What colour is the bird on the branch?", picture(1)),
        ("d", "Which river flows through the old town?", picture(2)),
    ]
    result = run(store, rows, DedupConfig())
    assert flags(result) == {
        ("b", "dedup.both", "flagged", "a"),
        ("c", "dedup.image", "flagged", "a"),
        ("c", "dedup.image", "flagged", "b"),
    }  # one row per pair
    assert result.kept.num_rows == 4 and result.counts["flagged"] == 2
    detail = json.loads(result.ledger().to_pylist()[0]["detail"])
    assert detail["in"] == "this release" and detail["question_jaccard"] == 1.0 and detail["image_distance"] <= 4
    table = {(r["against"], r["kind"]): r["flagged"] for r in result.extra["near_duplicates"]}
    assert table == {("this release", "image"): 2, ("this release", "question"): 0, ("this release", "both"): 1}


def test_drop_removes_only_question_and_image_matches(store):
    rows = [("a", HUBBLE, picture(1)), ("b", HUBBLE, picture(1, shift=6)), ("c", "What is the bird?", picture(1))]
    result = run(store, rows, DedupConfig(drop=True))
    assert result.kept.column("sample_id").to_pylist() == ["a", "c"]
    assert ("b", "dedup.both", "drop", "a") in flags(result)
    assert {verdict for sid, _, verdict, _ in flags(result) if sid == "c"} == {"flagged"}


def test_leakage_against_a_reference_but_not_the_same_item(store):
    training = Reference(
        "reflectv 1.0.0",
        items([(pa.array(["t1", "a"]), pa.array([HUBBLE.lower(), "Who painted the ceiling?"]), [[], [picture(3)]])]),
    )
    rows = [("x", HUBBLE, picture(4)), ("a", "Who painted the ceiling?", picture(3))]
    result = run(store, rows, DedupConfig(), [training])
    assert flags(result) == {("x", "dedup.question", "flagged", "t1")}  # "a" is the same item: not a duplicate
    assert json.loads(result.ledger().to_pylist()[0]["detail"])["in"] == "reflectv 1.0.0"


def test_a_different_question_is_not_a_near_duplicate(store):
    rows = [("a", HUBBLE, picture(1)), ("b", "In what year was the Eiffel Tower finished?", picture(5))]
    assert flags(run(store, rows, DedupConfig())) == set()


@pytest.mark.parametrize("distance", [0, 3, 8])
def test_banded_image_candidates_find_every_pair_within_the_distance(distance):
    rng = random.Random(distance)
    bases = [rng.getrandbits(64) for _ in range(40)]
    hashes = [
        (base ^ sum(1 << rng.randrange(64) for _ in range(rng.randrange(0, 10)))) & (2**64 - 1)
        for base in bases
        for _ in range(5)
    ]
    brute = {
        (i, j): bin(hashes[i] ^ hashes[j]).count("1")
        for i in range(len(hashes))
        for j in range(i + 1, len(hashes))
        if bin(hashes[i] ^ hashes[j]).count("1") <= distance
    }
    pairs = image_pairs(np.arange(len(hashes)), np.array(hashes, dtype=np.uint64), distance)
    assert dict(zip(zip(pairs.first.tolist(), pairs.second.tolist()), pairs.values.tolist())) == brute


def test_a_row_with_several_images_is_paired_by_its_closest_image():
    """Two images of row 0 near one of row 1: one pair, at the smaller distance; row 2's two images
    are the same picture, never a pair with itself."""
    base = 0x0F0F_F0F0_1234_5678
    rows = np.array([0, 0, 1, 2, 2])
    hashes = np.array([base ^ 0b111, base ^ 0b1, base, 0xFFFF_0000_FFFF_0000, 0xFFFF_0000_FFFF_0000], dtype=np.uint64)
    pairs = image_pairs(rows, hashes, 4)
    assert (pairs.first.tolist(), pairs.second.tolist(), pairs.values.tolist()) == ([0], [1], [1])
