"""The vocabulary of MIRROR's ``visual_prompt_generator`` tool call (seed paper 002, Figure 13).

A reflective turn asks the tool to draw marks of one colour and one shape on the image;
both come from these closed sets, and the release validator rejects anything else.
"""

from __future__ import annotations

from typing import Literal, get_args

TOOL_NAME = "visual_prompt_generator"
Color = Literal["red", "green", "blue", "cyan", "magenta", "pink", "orange", "purple", "gold", "brown"]
MarkType = Literal["arrow", "point", "circle", "line", "ellipse", "mask", "bbox"]
COLORS: tuple[Color, ...] = get_args(Color)
MARK_TYPES: tuple[MarkType, ...] = get_args(MarkType)
NONE = "None"  # anchor, colour and mark type of a turn that calls no tool (flag false)
