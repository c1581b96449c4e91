"""One ReflectV turn as the model is trained to write it, and the validator of that format.

A turn is ``<answer>...</answer><think>...</think><tool_call>...</tool_call>`` (seed paper
002, Figures 13-14), the tool call a JSON object
``{"name": "visual_prompt_generator", "arguments": {"flag", "anchor", "color", "mark_type"}}``.
A reflective turn calls the tool (flag true) with a colour and mark type from the closed
sets of ``core.visual_prompts``; the last turn of a conversation calls nothing (flag false,
the other three arguments "None").

``conversation_defects`` names every rule a conversation breaks, per turn. The rules, also
the expectations of the release's Great Expectations suite (``RULES``):

- ``structure``: the three parts present once each, in order, non-empty, nothing around them;
- ``tool_call``: JSON with the tool's name and exactly the four arguments;
- ``flag``: a boolean, true on every turn but the last, false on the last;
- ``final_none``: the last turn's anchor, colour and mark type are "None";
- ``color_enum`` / ``mark_type_enum``: a reflective turn's colour and mark type are in the sets;
- ``anchor_markup``: a reflective anchor is one line of plain words (no markup, no "None");
- ``anchor_in_think`` / ``color_in_think`` / ``mark_in_think``: the think text names the
  anchor's words, the colour and the mark type (singular or plural) the tool call uses;
- ``reveals_answer``: a reflective turn states no ground truth, in its answer, its think
  text or its anchor, whatever the domain: the final turn is the first to give it (002
  Figure 11: the rewritten feedback must not show the ground truth; section 4.3 takes only
  the marks' place from it, ``grounding.locate_phrase``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from mmcurate.core.text import content_tokens, find_answer
from mmcurate.core.visual_prompts import COLORS, MARK_TYPES, NONE, TOOL_NAME

from .wording import NOUNS, says

TAGS = ("answer", "think", "tool_call")
ARGUMENTS = ("flag", "anchor", "color", "mark_type")
RULES = (
    "structure",
    "tool_call",
    "flag",
    "final_none",
    "color_enum",
    "mark_type_enum",
    "anchor_markup",
    "anchor_in_think",
    "color_in_think",
    "mark_in_think",
    "reveals_answer",
)
_TURN = re.compile(
    r"<answer>(?P<answer>.*?)</answer><think>(?P<think>.*?)</think><tool_call>(?P<tool>.*?)</tool_call>", re.DOTALL
)
_MARKUP = re.compile(r"[<>{}\[\]*`#|\\]")


def tool_call(flag: bool, anchor: str = NONE, color: str = NONE, mark_type: str = NONE) -> str:
    """The tool call's JSON text."""
    arguments = {"flag": flag, "anchor": anchor, "color": color, "mark_type": mark_type}
    return json.dumps({"name": TOOL_NAME, "arguments": arguments}, ensure_ascii=False)


def render_turn(answer: str, think: str, call: str) -> str:
    return f"<answer>{answer.strip()}</answer><think>{think.strip()}</think><tool_call>{call}</tool_call>"


@dataclass(frozen=True)
class Turn:
    answer: str
    think: str
    arguments: dict[str, Any]


def parse_turn(text: str) -> tuple[Turn | None, str | None]:
    """(turn, None), or (None, the structural rule it breaks)."""
    match = _TURN.fullmatch(text)
    if match is None or any(text.count(f"<{t}>") != 1 or text.count(f"</{t}>") != 1 for t in TAGS):
        return None, "structure"
    answer, think = match.group("answer").strip(), match.group("think").strip()
    if not answer or not think:
        return None, "structure"
    try:
        call = json.loads(match.group("tool"))
    except ValueError:
        return None, "tool_call"
    arguments = call.get("arguments") if isinstance(call, dict) else None
    if (
        not isinstance(arguments, dict)
        or set(call) != {"name", "arguments"}
        or call["name"] != TOOL_NAME
        or set(arguments) != set(ARGUMENTS)
    ):
        return None, "tool_call"
    return Turn(answer, think, arguments), None


def turn_defects(turn: Turn, last: bool, truths: list[str]) -> list[str]:
    """The rules a parsed turn breaks, given its place and the sample's ground truth."""
    args = turn.arguments
    flag, anchor, color, mark_type = (args[a] for a in ARGUMENTS)
    if not isinstance(flag, bool):
        return ["flag"]
    if last:
        defects = ["flag"] if flag else []
        if (anchor, color, mark_type) != (NONE, NONE, NONE):
            defects.append("final_none")
        return defects
    defects = [] if flag else ["flag"]
    if color not in COLORS:
        defects.append("color_enum")
    if mark_type not in MARK_TYPES:
        defects.append("mark_type_enum")
    reveals = (
        ["reveals_answer"]
        if any(
            find_answer(text, truths) >= 0
            for text in (turn.answer, turn.think, anchor if isinstance(anchor, str) else "")
        )
        else []
    )
    if (
        not isinstance(anchor, str)
        or not anchor.strip()
        or "\n" in anchor
        or _MARKUP.search(anchor)
        or anchor.strip() == NONE
    ):
        return [*defects, "anchor_markup", *reveals]
    if not content_tokens(anchor) <= content_tokens(turn.think):
        defects.append("anchor_in_think")
    if color in COLORS and not says(turn.think, color):
        defects.append("color_in_think")
    if mark_type in NOUNS and not any(says(turn.think, noun) for noun in NOUNS[mark_type]):
        defects.append("mark_in_think")
    return [*defects, *reveals]


def conversation_defects(texts: list[str], truths: list[str]) -> list[tuple[int, str]]:
    """(turn index, rule) for every rule the conversation breaks; empty when it is valid."""
    if not texts:
        return [(0, "structure")]
    found: list[tuple[int, str]] = []
    for index, text in enumerate(texts):
        turn, problem = parse_turn(text)
        if turn is None:
            found.append((index, problem or "structure"))
        else:
            found += [(index, rule) for rule in turn_defects(turn, index == len(texts) - 1, truths)]
    return found


def defect_counts(texts: list[str], truths: list[str]) -> dict[str, int]:
    """How many turns break each rule of ``RULES``."""
    counts = Counter(rule for _, rule in conversation_defects(texts, truths))
    return {rule: counts.get(rule, 0) for rule in RULES}
