"""Issue 32 item 21: ReflectV asks "does this text state the answer?" through the one rule of
``core.text`` (``find_answer`` / ``answer_offsets``), never a re-implementation of its own."""

from __future__ import annotations

import inspect

import pytest

from mmcurate.annotation.reflectv import formatting, grounding, reflection, turns, visual, wording
from mmcurate.annotation.reflectv.reflection import keyword_parser
from mmcurate.annotation.reflectv.turns import conversation_defects, render_turn, tool_call
from mmcurate.annotation.reflectv.wording import mentions
from mmcurate.core.text import answer_offsets, find_answer


@pytest.mark.parametrize("module", [reflection, wording, turns, grounding, visual, formatting])
def test_no_reflectv_module_normalises_text_itself(module) -> None:
    assert "normalize(" not in inspect.getsource(module)


def test_a_text_states_each_answer_as_often_as_the_one_rule_finds_it() -> None:
    # TextVQA lists ten answers per question, often the same one several times: one mention each
    answers = ["cat", "Cat", "cat", "black cat"]
    text = "A black cat, next to a cat's bowl. Not a category."
    assert mentions(text, answers) == len(answer_offsets(text, answers)) == 3
    assert answer_offsets(text, answers)[0] == find_answer(text, answers)


@pytest.mark.parametrize("text, found", [("the category", False), ("the cat's bowl", True), ("CAT.", True)])
def test_keywords_and_anchors_use_the_one_rule(text, found) -> None:
    assert (keyword_parser(["cat"])(text) is None) == found == (find_answer(text, ["cat"]) >= 0)
    think = f"I should look again at the {text}, as indicated by a red point in the image."
    conversation = [
        render_turn("a dog", think, tool_call(True, text, "red", "point")),
        render_turn("a cat", "It holds.", tool_call(False)),
    ]
    assert ((0, "reveals_answer") in conversation_defects(conversation, ["cat"])) == found
