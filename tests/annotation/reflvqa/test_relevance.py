"""Stage 1: irrelevant-image filter. Skip path, rank rule on a hand-made encoder, tiny OpenCLIP."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mmcurate.annotation.reflvqa.relevance import CHECK, ImageRelevance
from mmcurate.core.ids import sha256_bytes

ANGLES = [0, 10, 20, 30, 40, 50]  # image i lies at ANGLES[i] degrees on the unit circle
# question of post j points at QUESTION_ANGLES[j]; own image is image j
QUESTION_ANGLES = [0, 10, 0, 24, 40, 0]
# hand-computed rank of own image among the 5 other images (1 + number strictly closer)
EXPECTED_RANKS = [1, 1, 3, 2, 1, 6]


class AngleEncoder:
    """A cross-modal encoder where similarity is the cosine of an angle we choose."""

    name = "test-angles"
    dim = 2

    def __init__(self, image_angles: dict[str, float], text_angles: dict[str, float]) -> None:
        self.image_angles = image_angles
        self.text_angles = text_angles
        self.images_encoded = 0

    @staticmethod
    def _vec(degrees: float) -> list[float]:
        return [math.cos(math.radians(degrees)), math.sin(math.radians(degrees))]

    def encode_text(self, texts):
        return np.array([self._vec(self.text_angles[t]) for t in texts], dtype=np.float32)

    def encode_images(self, images):
        self.images_encoded += len(images)
        return np.array([self._vec(self.image_angles[sha256_bytes(b)]) for b in images], dtype=np.float32)


@pytest.fixture
def posts(store, make_samples, png):
    shas = [store.put(png((40 * i, 255 - 40 * i, 7))) for i in range(len(ANGLES))]
    rows = [(f"p{j}", "c0", f"question {j}?", f"answer {j}", [shas[j]]) for j in range(len(ANGLES))]
    rows.append(("p5", "c1", "question 5?", "another answer on post 5", [shas[5]]))  # 2nd comment
    encoder = AngleEncoder(dict(zip(shas, ANGLES)), {f"question {j}?": a for j, a in enumerate(QUESTION_ANGLES)})
    return make_samples(rows), shas, encoder


def test_skipped_without_cross_modal_encoder(posts, store, stage_ctx):
    samples, _, _ = posts
    result = ImageRelevance(None).run(samples, stage_ctx())
    assert result.skipped and "cross-modal" in result.reason
    assert result.kept.equals(samples)
    assert {d.verdict for d in result.decisions} == {"skipped"}
    assert len(result.decisions) == samples.num_rows
    assert result.counts["skipped"] == samples.num_rows


def test_drop_iff_rank_above_top_k(posts, store, stage_ctx):
    samples, shas, encoder = posts
    result = ImageRelevance(encoder, n_distractors=100, top_k=2, seed=3).run(samples, stage_ctx())
    assert not result.skipped
    assert all(d.check == CHECK and d.model == "test-angles" for d in result.decisions)
    ranks = {}
    for d, row in zip(result.decisions, samples.to_pylist()):
        assert d.sample_id == row["sample_id"]
        post = json.loads(row["meta"])["post_id"]
        ranks[post] = d.detail["best_rank"]
        assert d.detail["distractors"] == 5  # fewer available than asked: all other posts' images
        assert d.verdict == ("keep" if d.detail["best_rank"] <= 2 else "drop")
    assert ranks == {f"p{j}": r for j, r in enumerate(EXPECTED_RANKS)}
    kept_posts = [json.loads(m)["post_id"] for m in result.kept["meta"].to_pylist()]
    assert kept_posts == ["p0", "p1", "p3", "p4"]
    assert result.counts["dropped"] == 3  # p2 and both comments of p5
    # each image is embedded once, however many posts draw it as a distractor
    assert encoder.images_encoded == len(shas)


def test_distractors_are_seeded_and_exclude_own_post(posts, store, stage_ctx):
    samples, shas, encoder = posts
    a = ImageRelevance(encoder, n_distractors=2, top_k=1, seed=7).run(samples, stage_ctx())
    b = ImageRelevance(encoder, n_distractors=2, top_k=1, seed=7).run(samples, stage_ctx())
    assert [d.detail for d in a.decisions] == [d.detail for d in b.decisions]
    for d in a.decisions:
        assert d.detail["distractors"] == 2
        assert 1 <= d.detail["best_rank"] <= 3


def test_missing_image_is_an_error_not_a_verdict(store, make_samples, stage_ctx):
    encoder = AngleEncoder({}, {"q?": 0})
    samples = make_samples([("p0", "c0", "q?", "a", ["ab" * 32])])
    result = ImageRelevance(encoder).run(samples, stage_ctx())
    assert result.kept.num_rows == 0
    assert result.decisions[0].verdict == "error"


def test_tiny_open_clip_end_to_end(tmp_path, posts, store, stage_ctx):
    """A real OpenCLIP model (tiny, random weights, saved and loaded from a local checkpoint)."""
    open_clip = pytest.importorskip("open_clip")
    torch = pytest.importorskip("torch")
    config = {
        "embed_dim": 16,
        "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 16, "head_width": 16},
        "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
    }
    folder = tmp_path / "clip"
    folder.mkdir()
    (folder / "TinyRelevanceClip.json").write_text(json.dumps(config))
    open_clip.add_model_config(folder / "TinyRelevanceClip.json")
    torch.manual_seed(0)
    model = open_clip.create_model("TinyRelevanceClip")
    checkpoint = folder / "tiny.pt"
    torch.save({"state_dict": model.state_dict()}, checkpoint)
    samples, _, _ = posts
    spec = f"open_clip:TinyRelevanceClip:{checkpoint}"
    result = ImageRelevance(spec, n_distractors=3, top_k=2, seed=0).run(samples, stage_ctx())
    assert result.extra["encoder"].startswith("open_clip:TinyRelevanceClip:tiny.pt@")
    for d in result.decisions:
        assert d.verdict == ("keep" if d.detail["best_rank"] <= 2 else "drop")
        assert 1 <= d.detail["best_rank"] <= 4 and d.detail["distractors"] == 3
    everything = ImageRelevance(spec, n_distractors=3, top_k=4, seed=0).run(samples, stage_ctx())
    assert everything.kept.num_rows == samples.num_rows  # rank <= 1 + 3 distractors always
