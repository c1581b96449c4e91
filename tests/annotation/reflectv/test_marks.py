"""Marks drawn in the named colour and shape, and the words that name them."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from mmcurate.annotation.grounders import Instance
from mmcurate.annotation.marks import draw_marks, png_bytes, rgb
from mmcurate.annotation.reflectv.wording import grounded_reflection, mark_phrase
from mmcurate.core.visual_prompts import COLORS, MARK_TYPES

GREY = (128, 128, 128)
BOX = (60.0, 40.0, 140.0, 100.0)


def _canvas() -> Image.Image:
    return Image.new("RGB", (200, 150), GREY)


def _pixels(image: Image.Image) -> np.ndarray:
    return np.asarray(image)


@pytest.mark.parametrize("color", COLORS)
def test_a_point_carries_the_named_colour(color) -> None:
    marked = draw_marks(_canvas(), [Instance((100.0, 70.0))], color, "point")
    stored = Image.open(io.BytesIO(png_bytes(marked)))  # PNG keeps the colour exact
    assert stored.getpixel((100, 70)) == rgb(color)
    assert _canvas().getpixel((100, 70)) == GREY


@pytest.mark.parametrize(
    "mark_type, where",
    [
        ("bbox", [(60, 70), (139, 70), (100, 40)]),  # the outline, on three sides
        ("ellipse", [(60, 70), (100, 40)]),  # leftmost and topmost points of the inscribed ellipse
        ("line", [(100, 104)]),  # just below the box
        ("arrow", [(58, 70), (40, 70)]),  # the head touches the box from the left, the shaft runs left
    ],
)
def test_each_mark_type_draws_in_the_named_colour_where_expected(mark_type, where) -> None:
    marked = _pixels(draw_marks(_canvas(), [Instance((100.0, 70.0), BOX)], "magenta", mark_type))
    for x, y in where:
        assert tuple(marked[y, x]) == rgb("magenta"), (mark_type, x, y)
    assert tuple(marked[70, 100]) == GREY  # the object itself stays visible
    assert tuple(marked[5, 5]) == GREY


def test_circle_surrounds_the_box() -> None:
    marked = _pixels(draw_marks(_canvas(), [Instance((100.0, 70.0), BOX)], "gold", "circle"))
    hits = np.argwhere(np.all(marked == rgb("gold"), axis=-1))
    distances = np.hypot(hits[:, 1] - 100, hits[:, 0] - 70)
    assert len(hits) > 50 and distances.min() >= np.hypot(40, 30) - 1  # outside the box's corners


def test_mask_tints_inside_and_outlines_in_the_colour() -> None:
    mask = np.zeros((150, 200), dtype=bool)
    mask[50:90, 80:120] = True
    marked = _pixels(draw_marks(_canvas(), [Instance((100.0, 70.0), BOX, mask)], "blue", "mask"))
    assert tuple(marked[50, 100]) == rgb("blue")  # the outline
    inside = marked[70, 100].astype(int)
    assert inside[2] > GREY[2] and inside[0] < GREY[0]  # tinted towards blue
    assert tuple(marked[30, 30]) == GREY


def test_one_mark_per_instance_and_point_only_instances() -> None:
    marked = _pixels(draw_marks(_canvas(), [Instance((30.0, 30.0)), Instance((170.0, 120.0))], "red", "bbox"))
    assert tuple(marked[30, 30]) == GREY  # a point-only instance gets a box around its point
    red = np.all(marked == rgb("red"), axis=-1)
    assert red[:, :100].any() and red[:, 100:].any()
    with pytest.raises(ValueError, match="no instance"):
        draw_marks(_canvas(), [], "red", "point")


def test_every_mark_type_draws_something() -> None:
    for mark_type in MARK_TYPES:
        marked = _pixels(draw_marks(_canvas(), [Instance((100.0, 70.0), BOX)], "green", mark_type))
        assert np.all(marked == rgb("green"), axis=-1).any(), mark_type


def test_mark_wording() -> None:
    assert mark_phrase("red", "point", 1) == "a red point"
    assert mark_phrase("red", "point", 1, definite=True) == "the red point"
    assert mark_phrase("red", "point", 3) == "red points"
    assert mark_phrase("orange", "bbox", 1) == "an orange bounding box"
    assert mark_phrase("cyan", "bbox", 2, definite=True) == "the cyan bounding boxes"
    assert mark_phrase("gold", "ellipse", 2) == "gold ellipses"
    text = grounded_reflection("I was wrong about the animal.", "long whiskers", "red", "point", 2, 0)
    assert text == (
        "I was wrong about the animal. I should look again at the long whiskers, "
        "as indicated by red points in the image."
    )
    with pytest.raises(ValueError):
        mark_phrase("red", "point", 0)
