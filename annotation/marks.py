"""Drawing visual prompts on an image with Pillow: one mark per located instance.

Colours are Pillow's named colours (``ImageColor.getrgb``: red is (255, 0, 0), gold
(255, 215, 0), ...), drawn solid, so a mark's pixels carry exactly the colour the
reflection names; the result is PNG-encoded, so they stay exact in the image store. Sizes
scale with the image. A point-only instance (a pointing model without SAM 2) gets a box of
15% of the shorter side around its point for the shapes that need one.

- ``point``: a filled disc on the point, on a thin white ring so it shows on any background;
- ``bbox``: the box outline;  ``ellipse``: the ellipse inscribed in the box;
- ``circle``: a circle around the box;  ``line``: an underline just below the box;
- ``arrow``: a shaft with a filled head whose tip touches the box from the left (from the
  right when there is no room);
- ``mask``: the instance's mask (SAM 2), or the box's ellipse without one, tinted at 45% with
  a solid outline.
"""

from __future__ import annotations

import io
import math

import numpy as np
from PIL import Image, ImageColor, ImageDraw
from scipy import ndimage

from .grounders import Box, Instance

MASK_ALPHA = 0.45
POINT_BOX_SHARE = 0.15


def rgb(color: str) -> tuple[int, int, int]:
    value = ImageColor.getrgb(color)
    return value[0], value[1], value[2]


def box_of(instance: Instance, width: int, height: int) -> Box:
    if instance.box is not None:
        return instance.box
    half = POINT_BOX_SHARE * min(width, height) / 2
    x, y = instance.point
    return (max(0.0, x - half), max(0.0, y - half), min(width - 1.0, x + half), min(height - 1.0, y + half))


def _stroke(width: int, height: int) -> int:
    return max(2, round(min(width, height) / 80))


def _point(draw: ImageDraw.ImageDraw, instance: Instance, color: tuple[int, int, int], size: tuple[int, int]) -> None:
    radius = max(4, round(min(size) * 0.025))
    x, y = instance.point
    ring = radius + max(1, radius // 3)
    draw.ellipse((x - ring, y - ring, x + ring, y + ring), fill=(255, 255, 255))
    draw.ellipse((x - radius, y - radius, x + radius, y + radius), fill=color)


def _arrow(draw: ImageDraw.ImageDraw, box: Box, color: tuple[int, int, int], size: tuple[int, int]) -> None:
    width, stroke = size[0], _stroke(*size)
    length = max(20.0, min(size) * 0.18)
    head = max(6.0, stroke * 3.0)
    y = (box[1] + box[3]) / 2
    if box[0] - length >= 0 or box[2] + length > width:
        tip, direction = (max(box[0] - stroke, head), y), 1  # shaft from the left, pointing right
    else:
        tip, direction = (min(box[2] + stroke, width - 1 - head), y), -1
    tail = (tip[0] - direction * length, y)
    draw.line((tail, (tip[0] - direction * head, y)), fill=color, width=stroke)
    draw.polygon(
        [tip, (tip[0] - direction * head, y - head * 0.6), (tip[0] - direction * head, y + head * 0.6)], fill=color
    )


def _mask(image: Image.Image, instance: Instance, box: Box, color: tuple[int, int, int]) -> Image.Image:
    if instance.mask is not None and instance.mask.shape == (image.height, image.width):
        mask = instance.mask
    else:
        shape = Image.new("L", image.size, 0)
        ImageDraw.Draw(shape).ellipse(box, fill=255)
        mask = np.asarray(shape) > 0
    pixels = np.asarray(image, dtype=np.float64).copy()
    pixels[mask] = (1 - MASK_ALPHA) * pixels[mask] + MASK_ALPHA * np.array(color, dtype=np.float64)
    edge = mask & ~ndimage.binary_erosion(mask, iterations=max(1, _stroke(image.width, image.height) // 2))
    pixels[edge] = color
    return Image.fromarray(pixels.round().astype(np.uint8))


def draw_marks(image: Image.Image, instances: list[Instance], color: str, mark_type: str) -> Image.Image:
    """A copy of ``image`` with one ``mark_type`` mark per instance, in ``color``."""
    if not instances:
        raise ValueError("nothing to mark: no instance")
    out = image.convert("RGB").copy()
    paint, size, stroke = rgb(color), out.size, _stroke(*out.size)
    for instance in instances:
        box = box_of(instance, *size)
        if mark_type == "mask":
            out = _mask(out, instance, box, paint)
            continue
        draw = ImageDraw.Draw(out)
        if mark_type == "point":
            _point(draw, instance, paint, size)
        elif mark_type == "bbox":
            draw.rectangle(box, outline=paint, width=stroke)
        elif mark_type == "ellipse":
            draw.ellipse(box, outline=paint, width=stroke)
        elif mark_type == "circle":
            cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
            radius = math.hypot(box[2] - box[0], box[3] - box[1]) / 2 + stroke
            draw.ellipse((cx - radius, cy - radius, cx + radius, cy + radius), outline=paint, width=stroke)
        elif mark_type == "line":
            y = min(size[1] - 1 - stroke, box[3] + 2 * stroke)
            draw.line((box[0], y, box[2], y), fill=paint, width=stroke * 2)
        elif mark_type == "arrow":
            _arrow(draw, box, paint, size)
        else:
            raise ValueError(f"unknown mark type {mark_type!r}")
    return out


def png_bytes(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()
