"""Pluggable grounding: where in the image is the keyword? (seed paper 002, section 3.2)

Every grounder answers ``locate(queries, ctx)`` with the instances it finds per query (a
point, and a box when it knows one) or an error; nothing found is an empty answer, not an
error. The spec (``core.specs.GroundingSpec``) picks one:

- ``pointing:<model>``: a pointing model of the config behind an OpenAI-compatible server,
  such as Molmo-7B (the paper's choice). Molmo writes points as XML-like tags whose ``x``/
  ``y`` (or ``x1``/``y1``, ``x2``/``y2``, ...) attributes are percentages of the image's width
  and height, 0 to 100 (Ai2's answer on huggingface.co/allenai/Molmo-7B-O-0924,
  discussion 1, and its ``extract_points`` regular expression). The reply is read strictly:
  no point tag, or a coordinate outside 0-100, is unreadable, asked again once, then an error.
- ``boxes:<file or folder>``: offline stand-in. Annotated regions shipped with the images
  (``regions.jsonl`` lines ``{"sha256", "label", "box": [x0, y0, x1, y1]}``, pixels); the
  regions whose labels share the most content words with the keyword (at least one) are
  the instances.
- ``detector:<file>``: offline stand-in for a detector such as SAM3: a scripted detector whose
  rules say, per image (by sha256), what it detects (``{"sha256", "label", "box", "stated":
  "hit" | "false alarm"}``, with an optional confidence ``"score"`` in [0, 1], as SAM3 gives
  each instance) and what it misses (``{"sha256", "label", "stated": "miss"}``); matched to
  the keyword as ``boxes`` are. Its rules are written against the images' content,
  so it never reads the annotations a benchmark's labels come from (``describe`` states its
  false alarms and misses for the notes).
- ``saliency``: offline stand-in that ignores the keyword: the largest blob of a
  spectral-residual saliency map (Hou & Zhang, 2007) and its peak.

``Sam2Segmenter`` (spec ``sam2:<config>:<checkpoint>``) turns each instance's point into a
SAM 2 mask (and the mask's box), as the paper does after Molmo, through the image API of
github.com/facebookresearch/sam2 (``README.md``, "Image prediction"):
``SAM2ImagePredictor(build_sam2(config, checkpoint))``, ``set_image``, then ``predict`` with
``point_coords``, ``point_labels`` and ``multimask_output``.
"""

from __future__ import annotations

import io
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from PIL import Image
from scipy import ndimage

from mmcurate.core.errors import MmcurateError
from mmcurate.core.images import ImageStore
from mmcurate.core.specs import Boxes, Detector, GroundingSpec, Pointing, Saliency, Sam2, coerce
from mmcurate.core.stages import StageContext
from mmcurate.core.tables import jsonl_objects
from mmcurate.core.text import content_tokens
from mmcurate.models.labels import ask_parsed
from mmcurate.models.requests import ChatRequest

Point = tuple[float, float]
Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels
POINT_TEMPLATE = "reflectv.grounding.point.v1"
POINT_REMINDER = 'Reply with points only, written as <point x="..." y="..." alt="...">...</point>.'
POINT_MAX_TOKENS = 256
_MOLMO_POINT = re.compile(r'x\d*="\s*([0-9]+(?:\.[0-9]+)?)"\s+y\d*="\s*([0-9]+(?:\.[0-9]+)?)"')


@dataclass(frozen=True, eq=False)
class Instance:
    """One located thing: a point, and a box (and a mask) when the grounder has one."""

    point: Point
    box: Box | None = None
    mask: np.ndarray | None = None  # bool, image height x width
    score: float | None = None  # the detector's confidence, None for a grounder that gives none


@dataclass(frozen=True)
class Query:
    key: str
    image: str  # sha256 in the image store
    keyword: str


@dataclass(frozen=True)
class Grounding:
    instances: list[Instance] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


class Grounder(Protocol):
    name: str

    def locate(self, queries: list[Query], ctx: StageContext) -> list[Grounding]: ...


def open_image(store: ImageStore, sha: str) -> Image.Image:
    with Image.open(io.BytesIO(store.read(sha))) as img:
        return img.convert("RGB")


def box_center(box: Box) -> Point:
    return ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)


# ---------------------------------------------------------------------------- boxes
def load_regions(path: Path) -> dict[str, list[tuple[str, Box]]]:
    """sha256 -> [(label, box)] from a ``regions.jsonl`` file or every one under a folder."""
    files = [path] if path.is_file() else sorted(path.rglob("regions.jsonl")) if path.is_dir() else []
    if not files:
        raise MmcurateError(f"boxes grounding: no regions.jsonl at or under {path}")
    regions: dict[str, list[tuple[str, Box]]] = defaultdict(list)
    for file in files:
        for line, record in jsonl_objects(file, "region"):
            box, label, sha = record.get("box"), record.get("label"), record.get("sha256")
            if not (
                isinstance(sha, str)
                and isinstance(label, str)
                and label.strip()
                and isinstance(box, list)
                and len(box) == 4
                and all(isinstance(v, (int, float)) for v in box)
                and box[0] < box[2]
                and box[1] < box[3]
            ):
                raise MmcurateError(f"{file}:{line}: a region needs sha256, label and box [x0, y0, x1, y1]")
            regions[sha].append((label.strip(), tuple(float(v) for v in box)))  # type: ignore[arg-type]
    return dict(regions)


class BoxesGrounder:
    """The annotated regions whose labels best match the keyword (stand-in)."""

    def __init__(self, path: Path) -> None:
        self.regions = load_regions(path)
        self.scores: dict[tuple[str, str, Box], float] = {}  # (sha256, label, box) -> confidence; regions have none
        self.name = f"boxes:{path}"
        self.files = [path] if path.is_file() else sorted(path.rglob("regions.jsonl"))

    def locate(self, queries: list[Query], ctx: StageContext) -> list[Grounding]:
        out = []
        for query in queries:
            wanted = content_tokens(query.keyword)
            scored = [
                (len(wanted & content_tokens(label)), label, box) for label, box in self.regions.get(query.image, [])
            ]
            best = max((s for s, _, _ in scored), default=0)
            chosen = [(label, box) for s, label, box in scored if best and s == best]
            out.append(
                Grounding(
                    [
                        Instance(box_center(box), box, score=self.scores.get((query.image, label, box)))
                        for label, box in chosen
                    ],
                    {"regions": [label for label, _ in chosen], "overlap": best},
                )
            )
        return out


STATED = ("hit", "false alarm", "miss")


class ScriptedDetector(BoxesGrounder):
    """A scripted detector (stand-in, module docstring): its detections are its regions."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise MmcurateError(f"detector grounding: no rules file at {path}")
        regions: dict[str, list[tuple[str, Box]]] = defaultdict(list)
        self.scores: dict[tuple[str, str, Box], float] = {}
        self.stated: dict[str, list[str]] = {kind: [] for kind in STATED}
        for line, record in jsonl_objects(path, "detection"):
            sha, label, stated, box = record.get("sha256"), record.get("label"), record.get("stated"), record.get("box")
            score = record.get("score")
            boxed = (
                isinstance(box, list)
                and len(box) == 4
                and all(isinstance(v, (int, float)) for v in box)
                and box[0] < box[2]
                and box[1] < box[3]
            )
            scored = score is None or (
                isinstance(score, (int, float)) and not isinstance(score, bool) and 0 <= score <= 1 and stated != "miss"
            )
            if not (
                isinstance(sha, str)
                and isinstance(label, str)
                and label.strip()
                and stated in STATED
                and (boxed if stated != "miss" else box is None)
                and scored
            ):
                raise MmcurateError(
                    f"{path}:{line}: a detection needs sha256, label, stated (hit, false alarm or "
                    "miss) and, unless a miss, a box [x0, y0, x1, y1] and optionally a score in [0, 1]"
                )
            self.stated[stated].append(label.strip())
            if stated != "miss":
                assert isinstance(box, list)  # boxed, checked above
                x0, y0, x1, y1 = (float(v) for v in box)
                region: tuple[str, Box] = (label.strip(), (x0, y0, x1, y1))
                regions[sha].append(region)
                if score is not None:
                    self.scores[(sha, *region)] = float(score)
        self.regions = dict(regions)
        self.name = f"detector:{path}"
        self.files = [path]

    def describe(self) -> str:
        """What the detector is, for the notes: its detections, stated false alarms and misses."""
        alarms, misses = self.stated["false alarm"], self.stated["miss"]
        return (
            f"a scripted detector ({len(self.stated['hit']) + len(alarms)} detections written as rules "
            f"over the images' content; stated false alarms: {', '.join(sorted(set(alarms))) or 'none'}; "
            f"stated misses: {', '.join(sorted(set(misses))) or 'none'}), standing in for SAM3; it reads no "
            "label file"
        )


# ---------------------------------------------------------------------------- saliency
def saliency_box(image: Image.Image, side: int = 64) -> tuple[Point, Box]:
    """Peak and box of the largest salient blob (spectral residual), in image pixels."""
    gray = image.convert("L")
    scale = side / max(gray.size)
    small = np.asarray(
        gray.resize((max(1, round(gray.width * scale)), max(1, round(gray.height * scale)))), dtype=np.float64
    )
    spectrum = np.fft.fft2(small)
    log_amplitude = np.log(np.abs(spectrum) + 1e-9)
    residual = log_amplitude - ndimage.uniform_filter(log_amplitude, size=3)
    saliency = ndimage.gaussian_filter(np.abs(np.fft.ifft2(np.exp(residual + 1j * np.angle(spectrum)))) ** 2, 2.5)
    labels, count = ndimage.label(saliency > 3 * saliency.mean())
    peak = np.unravel_index(int(np.argmax(saliency)), saliency.shape)
    if count == 0:
        rows, cols = slice(peak[0], peak[0] + 1), slice(peak[1], peak[1] + 1)
    else:
        sizes = ndimage.sum(np.ones_like(saliency), labels, index=range(1, count + 1))
        rows, cols = ndimage.find_objects(labels)[int(np.argmax(sizes))]
    to = 1 / scale
    box = (cols.start * to, rows.start * to, min(image.width, cols.stop * to), min(image.height, rows.stop * to))
    return ((peak[1] + 0.5) * to, (peak[0] + 0.5) * to), box


class SaliencyGrounder:
    """The most salient region, whatever the keyword (stand-in)."""

    name = "saliency-spectral-residual-v1"

    def locate(self, queries: list[Query], ctx: StageContext) -> list[Grounding]:
        out = []
        for query in queries:
            point, box = saliency_box(open_image(ctx.store, query.image))
            out.append(Grounding([Instance(point, box)], {"keyword_used": False}))
        return out


# ---------------------------------------------------------------------------- pointing
def parse_points(text: str) -> list[Point] | None:
    """Molmo's points as fractions of width and height (0-1), or None when the reply has none
    or a coordinate outside 0-100."""
    found = [(float(x), float(y)) for x, y in _MOLMO_POINT.findall(text)]
    if not found or any(not (0 <= x <= 100 and 0 <= y <= 100) for x, y in found):
        return None
    return [(x / 100, y / 100) for x, y in found]


def point_request(query: Query) -> ChatRequest:
    return ChatRequest(
        query.key,
        [
            {
                "role": "user",
                "content": [
                    {"type": "image", "sha256": query.image},
                    {"type": "text", "text": f"Point to the {query.keyword}."},
                ],
            }
        ],
        POINT_TEMPLATE,
        max_tokens=POINT_MAX_TOKENS,
    )


class PointingGrounder:
    """A pointing model (Molmo) asked to point at the keyword."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.name = f"pointing:{model}"

    def locate(self, queries: list[Query], ctx: StageContext) -> list[Grounding]:
        if not ctx.pool.settings.model(self.model).vision:
            raise MmcurateError(f"pointing model {self.model!r} cannot see images (vision: false)")
        try:
            replies = ask_parsed(
                ctx.pool.client(self.model),
                [point_request(q) for q in queries],
                [parse_points] * len(queries),
                POINT_REMINDER,
                "grounding",
                "Molmo point tags",
            )
        finally:
            ctx.pool.release(self.model)
        out = []
        for query, reply in zip(queries, replies):
            if not reply.ok:
                out.append(Grounding([], {"raw": reply.raw}, reply.error))
                continue
            width, height = open_image(ctx.store, query.image).size
            out.append(Grounding([Instance((x * width, y * height)) for x, y in reply.label], {"raw": reply.raw}))
        return out


def make_grounder(spec: GroundingSpec | str) -> Grounder:
    spec = coerce(GroundingSpec, spec)
    if isinstance(spec, Boxes):
        return BoxesGrounder(spec.path)
    if isinstance(spec, Detector):
        return ScriptedDetector(spec.path)
    if isinstance(spec, Saliency):
        return SaliencyGrounder()
    assert isinstance(spec, Pointing)
    return PointingGrounder(spec.model)


# ---------------------------------------------------------------------------- SAM 2
class Sam2Segmenter:
    """SAM 2 masks from the grounded points (``pip install 'mmcurate[sam2]'``)."""

    def __init__(self, spec: Sam2) -> None:
        self.spec = spec
        self.name = str(spec)
        self._predictor: Any = None

    def predictor(self) -> Any:
        if self._predictor is None:
            if not self.spec.checkpoint.is_file():
                raise MmcurateError(f"SAM 2 checkpoint not found: {self.spec.checkpoint}")
            try:
                from sam2.build_sam import build_sam2
                from sam2.sam2_image_predictor import SAM2ImagePredictor
            except ImportError:
                raise MmcurateError("segmenter sam2 needs the sam2 package: pip install 'mmcurate[sam2]'") from None
            self._predictor = SAM2ImagePredictor(build_sam2(self.spec.config, str(self.spec.checkpoint), device="cpu"))
        return self._predictor

    def refine(self, image: Image.Image, instances: list[Instance]) -> list[Instance]:
        """Each instance with the mask SAM 2 predicts from its point, and that mask's box."""
        if not instances:
            return []
        predictor = self.predictor()
        predictor.set_image(np.asarray(image.convert("RGB")))
        out = []
        for instance in instances:
            masks, _, _ = predictor.predict(
                point_coords=np.array([instance.point], dtype=np.float32),
                point_labels=np.array([1]),
                multimask_output=False,
            )
            mask = np.asarray(masks[0]).astype(bool)
            if not mask.any():
                out.append(instance)
                continue
            rows, cols = np.nonzero(mask)
            out.append(
                Instance(
                    instance.point,
                    (float(cols.min()), float(rows.min()), float(cols.max() + 1), float(rows.max() + 1)),
                    mask,
                    instance.score,
                )
            )
        return out
