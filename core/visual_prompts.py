"""The vocabulary of MIRROR's ``visual_prompt_generator`` tool call (seed paper 002, Figure 13).

A reflective turn asks the tool to draw marks of one colour and one shape on the image;
both come from these closed sets, and the release validator rejects anything else.
"""
from __future__ import annotations

from typing import Literal

TOOL_NAME = "visual_prompt_generator"
COLORS = ("red", "green", "blue", "cyan", "magenta", "pink", "orange", "purple", "gold", "brown")
MARK_TYPES = ("arrow", "point", "circle", "line", "ellipse", "mask", "bbox")
NONE = "None"  # anchor, colour and mark type of a turn that calls no tool (flag false)

Color = Literal["red", "green", "blue", "cyan", "magenta", "pink", "orange", "purple", "gold", "brown"]
MarkType = Literal["arrow", "point", "circle", "line", "ellipse", "mask", "bbox"]
