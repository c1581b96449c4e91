"""Visual consistency: every marked turn needs the verifier's yes."""

from __future__ import annotations

import pytest

from mmcurate.annotation.reflectv.chains import issues_of, turns_of, with_chains
from mmcurate.annotation.reflectv.visual import VisualCheck
from mmcurate.core.errors import MmcurateError

Q = "What animal is in the picture?"


def _marked(lab, names: list[str]):
    rows = [lab.sample(name, Q, "cat") for name in names]
    table = lab.chains(rows, [[("a dog", 3, "No."), ("a fox", 6, "Closer."), ("a cat", 10, "Yes.")]] * len(rows))
    turns = turns_of(table)
    for name, sample_turns in zip(names, turns):
        for n, turn in enumerate(sample_turns[:-1]):
            turn.update(
                keyword=f"{name} part {n}",
                color="red",
                mark_type="bbox",
                marks=1,
                marked_image=lab.image(),
                think=f"I should look again at the {name} part {n}.",
            )
    return with_chains(table, turns, [None] * len(rows))


def test_every_turn_must_be_confirmed(lab) -> None:
    verifier = lab.model(
        "verifier",
        [
            {"when_all": ["should show: fox part 1"], "answer": "No"},
            {"when_all": ["should show: owl part 0"], "answer": "maybe, the marks are close"},
        ],
        default="yes",
        vision=True,
    )
    result = VisualCheck(verifier).run(_marked(lab, ["cat", "fox", "owl"]), lab.ctx())
    assert issues_of(result.kept) == [
        None,
        "visual: the marks do not show 'fox part 1' (turn 2)",
        "visual: undetermined (turn 1)",
    ]
    cat, fox, _ = turns_of(result.kept)
    assert [t["verified"] for t in cat] == [True, True, None] and [t["verified"] for t in fox[:2]] == [True, False]
    verdicts = [(d.context_id, d.verdict) for d in result.decisions if d.check == "visual.marks.v1"]
    assert verdicts == [("t1", "yes"), ("t2", "yes"), ("t1", "yes"), ("t2", "no"), ("t1", "error"), ("t2", "yes")]
    assert result.counts == {"input": 3, "checked": 3, "verified": 1, "turns": 6, "errors": 1}


def test_the_verifier_sees_the_marked_image(lab) -> None:
    verifier = lab.model("verifier", [], default="yes", vision=True)
    VisualCheck(verifier).run(_marked(lab, ["cat"]), lab.ctx())
    assert lab.calls(verifier)["calls"] == 2
    blind = lab.model("blind", [], default="yes")
    with pytest.raises(MmcurateError, match="cannot see images"):
        VisualCheck(blind).run(_marked(lab, ["cat"]), lab.ctx())
