"""The hybrid composition at rho, the rendered turns, and the validator of the turn format."""

from __future__ import annotations

import json

import pytest

from mmcurate.annotation.reflectv.chains import turns_of, with_chains
from mmcurate.annotation.reflectv.formatting import FormatTrajectories, rho_split
from mmcurate.annotation.reflectv.turns import RULES, conversation_defects, defect_counts, render_turn, tool_call


def _ids(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


@pytest.mark.parametrize(
    "chains, pairs, rho, kept, collapsed, dropped",
    [
        (10, 2, 0.75, 9, 1, 0),  # too many chains: ceil(0.75 * 12) = 9 stay chains
        (9, 3, 0.75, 9, 0, 0),  # exactly rho
        (10, 0, 0.75, 8, 2, 0),  # ceil(7.5) = 8
        (3, 5, 0.75, 3, 0, 4),  # too few chains: floor(3 * 0.25 / 0.75) = 1 pair stays
        (5, 5, 0.75, 5, 0, 4),  # floor(5 / 3) = 1: share 5/6, never below rho
        (6, 2, 0.75, 6, 0, 0),
        (0, 4, 0.75, 0, 0, 0),  # no chain at all: rho cannot be reached, nothing is dropped
        (4, 4, 1.0, 4, 0, 4),
        (4, 4, 0.0, 0, 4, 0),
        (7, 3, 0.6, 6, 1, 0),  # 0.6 is exact: ceil(6) = 6, not 7
    ],
)
def test_rho_counts_when_pairs_may_drop(chains, pairs, rho, kept, collapsed, dropped) -> None:
    """``rho_rule: collapse_or_drop``, the reading that also drops surplus QA pairs."""
    k, c, d = rho_split(_ids("c", chains), _ids("p", pairs), rho, seed=0, rule="collapse_or_drop")
    assert (len(k), len(c), len(d)) == (kept, collapsed, dropped)
    assert set(k) | set(c) == set(_ids("c", chains)) and set(d) <= set(_ids("p", pairs))


@pytest.mark.parametrize(
    "chains, pairs, rho, kept, collapsed",
    [
        (10, 2, 0.75, 9, 1),  # too many chains: ceil(0.75 * 12) = 9 stay chains
        (10, 0, 0.75, 8, 2),
        (3, 5, 0.75, 3, 0),  # too few chains: every QA pair stays, the share (3/8) is below rho
        (5, 5, 0.75, 5, 0),
        (4, 4, 1.0, 4, 0),
        (4, 4, 0.0, 0, 4),
    ],
)
def test_rho_is_reached_by_collapsing_chains_only(chains, pairs, rho, kept, collapsed) -> None:
    """Issue 32 item 19, the paper's reading (002 section 4.5: "Truncated QA collapses failed or
    redundant sequences into QA pairs"): rho is reached by collapsing chains; no QA pair is dropped."""
    k, c, d = rho_split(_ids("c", chains), _ids("p", pairs), rho, seed=0)
    assert (len(k), len(c), d) == (kept, collapsed, [])


def test_rho_choice_is_seeded_not_ordered() -> None:
    chains = _ids("c", 10)
    kept, collapsed, _ = rho_split(chains, [], 0.75, seed=1)
    assert rho_split(list(reversed(chains)), [], 0.75, seed=1)[1] == collapsed
    assert rho_split(chains, [], 0.75, seed=2)[1] != collapsed or rho_split(chains, [], 0.75, seed=3)[1] != collapsed


def _call(**arguments) -> str:
    base = {"flag": True, "anchor": "long whiskers", "color": "red", "mark_type": "point"}
    return json.dumps({"name": "visual_prompt_generator", "arguments": {**base, **arguments}})


THINK = "I was wrong. I should look again at the long whiskers, as indicated by a red point in the image."
GOOD = render_turn("a dog", THINK, tool_call(True, "long whiskers", "red", "point"))
LAST = render_turn("a cat", "My answer holds up.", tool_call(False))


@pytest.mark.parametrize(
    "first, last, rule",
    [
        (GOOD.replace("<think>", "<think><think>"), LAST, "structure"),
        ("<answer>a dog</answer><tool_call>{}</tool_call><think>x</think>", LAST, "structure"),
        (GOOD.replace("<answer>a dog", "<answer> "), LAST, "structure"),
        (GOOD + " trailing", LAST, "structure"),
        (render_turn("a dog", THINK, "{not json"), LAST, "tool_call"),
        (render_turn("a dog", THINK, json.dumps({"name": "zoom", "arguments": {}})), LAST, "tool_call"),
        (render_turn("a dog", THINK, _call().replace('"mark_type": "point"', '"shape": "point"')), LAST, "tool_call"),
        (render_turn("a dog", THINK, _call(flag="yes")), LAST, "flag"),
        (render_turn("a dog", THINK, _call(flag=False)), LAST, "flag"),
        (GOOD, render_turn("a cat", "Fine.", tool_call(True, "cat", "red", "point")), "flag"),
        (GOOD, render_turn("a cat", "Fine.", _call(flag=False, anchor="cat")), "final_none"),
        (render_turn("a dog", THINK.replace("red", "crimson"), _call(color="crimson")), LAST, "color_enum"),
        (render_turn("a dog", THINK, _call(mark_type="star")), LAST, "mark_type_enum"),
        (render_turn("a dog", THINK, _call(anchor="long\nwhiskers")), LAST, "anchor_markup"),
        (render_turn("a dog", THINK, _call(anchor="<b>whiskers</b>")), LAST, "anchor_markup"),
        (render_turn("a dog", THINK, _call(anchor="None")), LAST, "anchor_markup"),
        (render_turn("a dog", THINK, _call(anchor="pointed ears")), LAST, "anchor_in_think"),
        (render_turn("a dog", THINK, _call(color="blue")), LAST, "color_in_think"),
        (render_turn("a dog", THINK, _call(mark_type="arrow")), LAST, "mark_in_think"),
        (
            render_turn("a dog", THINK.replace("long whiskers", "cat whiskers"), _call(anchor="cat whiskers")),
            LAST,
            "reveals_answer",
        ),
        (
            render_turn("a dog", THINK + " It is a cat.", _call()),
            LAST,
            "reveals_answer",
        ),  # issue 43 item 2: the think text
    ],
)
def test_validator_rejections(first, last, rule) -> None:
    found = conversation_defects([first, last], ["cat"])
    assert rule in {r for _, r in found}, found


def test_a_valid_conversation_and_counts() -> None:
    assert conversation_defects([GOOD, LAST], ["cat"]) == []
    assert conversation_defects([LAST], ["cat"]) == []
    plural = render_turn(
        "a dog", THINK.replace("a red point", "red points"), tool_call(True, "long whiskers", "red", "point")
    )
    assert conversation_defects([plural, LAST], ["cat"]) == []
    counts = defect_counts([GOOD, GOOD], ["cat"])
    assert set(counts) == set(RULES) and counts["flag"] == 1 and counts["final_none"] == 1
    assert conversation_defects([], ["cat"]) == [(0, "structure")]


def test_stage_renders_chains_and_pairs(lab) -> None:
    q = "What animal is in the picture?"
    rows = [lab.sample(f"s{i}", q, "cat") for i in range(4)]
    dialogue = [("a dog", 3, "No."), ("a cat", 10, "Yes.")]
    table = lab.chains(
        rows,
        [dialogue, dialogue, dialogue, [("a cat", 10, "Yes.")]],
        [None, None, "visual: the marks do not show 'x' (turn 1)", None],
    )
    turns = turns_of(table)
    marked = lab.image()
    for sample_turns in turns[:2]:
        sample_turns[0].update(
            keyword="long whiskers", color="red", mark_type="point", marks=1, marked_image=marked, think=THINK
        )
    table = with_chains(table, turns, [None, None, "visual: the marks do not show 'x' (turn 1)", None])
    result = FormatTrajectories(rho=0.5, seed=0).run(table, lab.ctx())
    out = {r["source_id"]: r for r in result.kept.to_pylist()}
    assert {k: v["format"] for k, v in out.items()} == {
        "s0": "multi_turn",
        "s1": "multi_turn",
        "s2": "single_turn",
        "s3": "single_turn",
    }
    chain = out["s0"]["conversation"]
    assert [t["turn"] for t in chain] == [1, 2] and chain[0]["image"] == rows[0]["images"][0]
    assert chain[1]["image"] == marked and chain[0]["text"] == GOOD
    assert json.loads(chain[1]["text"].split("<tool_call>")[1].split("</tool_call>")[0])["arguments"]["flag"] is False
    pair = out["s2"]["conversation"]
    assert len(pair) == 1 and pair[0]["text"].startswith("<answer>a cat</answer>")
    # depth counts reflective rounds (Figure 5c): one for a two-answer chain, none for a QA pair
    assert (out["s0"]["depth"], out["s2"]["depth"], out["s3"]["depth"]) == (1, 0, 0)
    assert out["s0"]["domain"] == "General QA"
    assert result.counts["multi_turn"] == 2 and result.extra["share"] == 0.5
    reasons = {d.sample_id: d.detail["reason"] for d in result.decisions if d.check == "format.rho.v1"}
    assert reasons[rows[2]["sample_id"]] == "visual: the marks do not show 'x' (turn 1)"


def test_a_chain_that_fails_the_validator_is_collapsed(lab) -> None:
    rows = [lab.sample("s0", "What animal?", "cat")]
    table = lab.chains(rows, [[("a dog", 3, "No."), ("a cat", 10, "Yes.")]])
    turns = turns_of(table)
    turns[0][0].update(
        keyword="cat face",
        color="red",
        mark_type="point",
        marks=1,
        marked_image=lab.image(),
        think="I should look again at the cat face, as indicated by a red point in the image.",
    )
    result = FormatTrajectories(rho=0.75).run(with_chains(table, turns, [None]), lab.ctx())
    [row] = result.kept.to_pylist()
    assert row["format"] == "single_turn"  # the anchor gives the answer away
    checks = [(d.verdict, d.detail["defects"]) for d in result.decisions if d.check == "format.validate.v1"]
    assert checks == [("fail", ["turn 1: reveals_answer"]), ("pass", [])]


def test_no_turn_before_the_last_states_a_charts_answer(lab) -> None:
    """Issue 43 item 2: a ChartQA chain whose reflective turn states the ground truth (in the
    anchor, as the keyword "from the ground truth" did, or in the think text) fails the validator
    and becomes a QA pair: no dense-perception exemption; the final turn alone gives the answer."""
    question = "Which year had the highest sales?"
    rows = [lab.sample(name, question, "2019", domain="Chart") for name in ("anchor", "think", "clean")]
    table = lab.chains(rows, [[("2020", 4, "That bar is not the tallest one."), ("2019", 10, "Correct.")]] * 3)
    turns = turns_of(table)
    for sample_turns, keyword, think in zip(
        turns,
        ["year highest sales (2019)", "year highest sales", "year highest sales"],
        [
            "I should compare the year highest sales (2019), as indicated by a red point in the image.",
            "The tallest bar is 2019; I should compare the year highest sales, as indicated by a red point in the image.",
            "I should compare the year highest sales, as indicated by a red point in the image.",
        ],
    ):
        sample_turns[0].update(
            keyword=keyword, color="red", mark_type="point", marks=1, marked_image=lab.image(), think=think
        )
    result = FormatTrajectories(rho=1.0).run(with_chains(table, turns, [None] * 3), lab.ctx())
    formats = {r["source_id"]: r["format"] for r in result.kept.to_pylist()}
    assert formats == {"anchor": "single_turn", "think": "single_turn", "clean": "multi_turn"}
    checks = {
        d.sample_id: d.detail["defects"]
        for d in result.decisions
        if d.check == "format.validate.v1" and d.detail["format"] == "multi_turn"
    }
    assert checks == {
        rows[0]["sample_id"]: ["turn 1: reveals_answer"],
        rows[1]["sample_id"]: ["turn 1: reveals_answer"],
        rows[2]["sample_id"]: [],
    }
    [chain] = [r for r in result.kept.to_pylist() if r["format"] == "multi_turn"]
    assert (
        "2019" not in chain["conversation"][0]["text"] and "<answer>2019</answer>" in chain["conversation"][1]["text"]
    )


def test_rho_is_met_after_validation_when_pairs_may_drop(lab) -> None:
    """Chains that break the format become QA pairs before the split, so the release keeps rho
    (``rho_rule: collapse_or_drop``)."""
    rows = [lab.sample(f"s{i}", "What animal?", "cat") for i in range(4)]
    dialogue = [("a dog", 3, "No."), ("a cat", 10, "Yes.")]
    table = lab.chains(rows, [dialogue] * 4)
    turns = turns_of(table)
    for n, sample_turns in enumerate(turns):
        keyword = "cat face" if n < 2 else "long whiskers"  # the first two anchors give the answer away
        sample_turns[0].update(
            keyword=keyword,
            color="red",
            mark_type="point",
            marks=1,
            marked_image=lab.image(),
            think=f"I should look again at the {keyword}, as indicated by a red point in the image.",
        )
    result = FormatTrajectories(rho=0.75, seed=0, rho_rule="collapse_or_drop").run(
        with_chains(table, turns, [None] * 4), lab.ctx()
    )
    formats = [r["format"] for r in result.kept.to_pylist()]
    assert formats.count("multi_turn") / len(formats) >= 0.75
    assert formats.count("multi_turn") == 2 and result.counts["dropped_for_rho"] == 2
    share = {d.sample_id: d.detail["reason"] for d in result.decisions if d.check == "format.rho.v1"}
    assert share[rows[0]["sample_id"]] == "surplus QA pair: rho reached"
    rejected = [d.detail["reason"] for d in result.decisions if d.check == "format.rho.v1" and d.verdict == "drop"]
    assert rejected == ["surplus QA pair: rho reached"] * 2


def test_by_default_no_qa_pair_is_dropped_for_rho(lab) -> None:
    """Issue 32 item 19 on the stage: two valid chains and two that fail the validator (QA pairs)
    stay four released samples, share 0.5 below rho, nothing dropped; the ledger names the rule."""
    rows = [lab.sample(f"s{i}", "What animal?", "cat") for i in range(4)]
    table = lab.chains(rows, [[("a dog", 3, "No."), ("a cat", 10, "Yes.")]] * 4)
    turns = turns_of(table)
    for n, sample_turns in enumerate(turns):
        keyword = "cat face" if n < 2 else "long whiskers"  # the first two anchors give the answer away
        sample_turns[0].update(
            keyword=keyword,
            color="red",
            mark_type="point",
            marks=1,
            marked_image=lab.image(),
            think=f"I should look again at the {keyword}, as indicated by a red point in the image.",
        )
    result = FormatTrajectories(rho=0.75, seed=0).run(with_chains(table, turns, [None] * 4), lab.ctx())
    assert sorted(r["format"] for r in result.kept.to_pylist()) == ["multi_turn"] * 2 + ["single_turn"] * 2
    assert result.counts["dropped_for_rho"] == 0 and result.extra["rho_rule"] == "collapse"
    assert {d.detail["rho_rule"] for d in result.decisions if d.check == "format.rho.v1"} == {"collapse"}
