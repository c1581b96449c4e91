"""Encoders: MiniLM offline, the classical image descriptor, and OpenCLIP loaded from a tiny checkpoint."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageOps

from mmcurate.core.errors import MmcurateError
from mmcurate.retrieval.encoders import cross_modal_encoder, image_encoder, text_encoder
from tests.fixtures.builders import images as fixture_images

TINY_CLIP = {
    "embed_dim": 24,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 8, "head_width": 16},
    "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}


def mirrored(data: bytes) -> bytes:
    buf = io.BytesIO()
    ImageOps.mirror(Image.open(io.BytesIO(data)).convert("RGB")).save(buf, format="PNG")
    return buf.getvalue()


def assert_unit_rows(x: np.ndarray, rows: int, dim: int) -> None:
    assert x.dtype == np.float32 and x.shape == (rows, dim)
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)


def tiny_clip_checkpoint(folder: Path) -> Path:
    import open_clip
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "tiny-clip.json"
    config.write_text(json.dumps(TINY_CLIP))
    open_clip.add_model_config(config)
    torch.manual_seed(0)
    model = open_clip.create_model("tiny-clip")
    checkpoint = folder / "tiny-clip.pt"
    torch.save(model.state_dict(), checkpoint)
    return checkpoint


def test_minilm_offline_similarity_ordering() -> None:
    encoder = text_encoder("minilm")
    assert encoder is text_encoder("minilm")  # cached per spec
    assert encoder.name == "sentence-transformers/all-MiniLM-L6-v2" and encoder.dim == 384
    x = encoder.encode_text(
        [
            "A cat sleeps on the sofa.",
            "A kitten is napping on the couch.",
            "The rocket launched a satellite into orbit.",
        ]
    )
    assert_unit_rows(x, 3, 384)
    assert x[0] @ x[1] > x[0] @ x[2] + 0.3
    assert encoder.encode_text([]).shape == (0, 384)


def test_descriptor_ranks_a_flipped_copy_above_other_images() -> None:
    images = fixture_images
    names = [
        "skimage_astronaut",
        "skimage_coffee",
        "skimage_chelsea",
        "skimage_rocket",
        "skimage_horse",
        "sklearn_china",
        "sklearn_flower",
    ]
    originals = [images.encode(name) for name in names]
    encoder = image_encoder("descriptor")
    assert encoder.name.startswith("descriptor:")
    base = encoder.encode_images(originals)
    flipped = encoder.encode_images([mirrored(data) for data in originals])
    assert_unit_rows(base, len(names), encoder.dim)
    similarity = flipped @ base.T
    assert similarity.argmax(axis=1).tolist() == list(range(len(names)))
    assert (np.diag(similarity) > 0.98).all()


def test_descriptor_rejects_undecodable_bytes() -> None:
    with pytest.raises(MmcurateError, match="cannot decode image"):
        image_encoder("descriptor").encode_images([b"not an image"])


def test_open_clip_from_a_tiny_saved_checkpoint(tmp_path: Path) -> None:
    checkpoint = tiny_clip_checkpoint(tmp_path / "clip")
    spec = f"open_clip:tiny-clip:{checkpoint}"
    encoder = cross_modal_encoder(spec)
    assert text_encoder(spec) is encoder and image_encoder(spec) is encoder
    assert encoder.name.startswith("open_clip:tiny-clip:tiny-clip.pt@") and encoder.dim == 24
    texts = encoder.encode_text(["a photo of a cat", "a photo of a rocket", "a clock"])
    pics = encoder.encode_images([fixture_images.encode("skimage_coffee"), fixture_images.encode("skimage_rocket")])
    assert_unit_rows(texts, 3, 24)
    assert_unit_rows(pics, 2, 24)
    assert not np.allclose(texts[0], texts[1])
    # the same weights give the same embeddings: the checkpoint, not a fresh init, was loaded
    import open_clip
    import torch

    reloaded = open_clip.create_model("tiny-clip")
    reloaded.load_state_dict(torch.load(checkpoint))
    with torch.no_grad():
        direct = reloaded.eval().encode_text(open_clip.get_tokenizer("tiny-clip")(["a clock"])).numpy()
    np.testing.assert_allclose(texts[2], direct[0] / np.linalg.norm(direct[0]), atol=1e-5)


def test_open_clip_errors(tmp_path: Path) -> None:
    with pytest.raises(MmcurateError, match="checkpoint not found"):
        text_encoder(f"open_clip:ViT-B-32:{tmp_path / 'missing.pt'}")
    (tmp_path / "w.pt").write_bytes(b"")
    with pytest.raises(MmcurateError, match="does not know architecture"):
        text_encoder(f"open_clip:no-such-arch:{tmp_path / 'w.pt'}")
    with pytest.raises(MmcurateError, match="must look like"):
        image_encoder("open_clip:ViT-B-32")


@pytest.mark.parametrize("spec", ["minilm", "descriptor"])
def test_non_clip_encoders_are_not_cross_modal(spec: str) -> None:
    with pytest.raises(MmcurateError, match=f"unknown spec '{spec}'; use 'open_clip"):
        cross_modal_encoder(spec)


def test_wrong_modality_specs() -> None:
    with pytest.raises(MmcurateError, match="unknown spec 'descriptor'; use 'minilm' or"):
        text_encoder("descriptor")
    with pytest.raises(MmcurateError, match="unknown spec 'minilm'; use 'descriptor' or"):
        image_encoder("minilm")
    with pytest.raises(MmcurateError, match="unknown spec 'bert'"):
        text_encoder("bert")


def test_loading_and_encoding_print_no_progress_bars(tmp_path: Path) -> None:
    """A run's output shows mmcurate's progress, not the libraries' weight-loading or batch bars
    (in a fresh process: the encoder is loaded once per process)."""
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    code = (
        "import logging; logging.basicConfig(level=logging.INFO); "
        "from mmcurate.retrieval.encoders import text_encoder; text_encoder('minilm').encode_text(['a', 'b'])"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Loading weights" not in done.stderr and "Batches" not in done.stderr and "it/s]" not in done.stderr
