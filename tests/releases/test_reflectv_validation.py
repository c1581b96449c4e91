"""ReflectV releases: the turn validator's rules as Great Expectations expectations."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from mmcurate.annotation.reflectv.formatting import TRAJECTORY
from mmcurate.annotation.reflectv.turns import render_turn, tool_call
from mmcurate.core.ledger import ledger_table
from mmcurate.core.schema import QUARANTINE
from mmcurate.releases.draft import ReleaseDraft
from mmcurate.releases.errors import ReleaseInvalid
from mmcurate.releases.reflectv.draft import KIND
from mmcurate.releases.reflectv.schema import DIALOGUE
from mmcurate.releases.writer import write_release
from tests.releases import release_builders as b

THINK = "I was wrong. I should look again at the long whiskers, as indicated by a red point in the image."
LAST = render_turn("a cat", "My answer holds up.", tool_call(False))


def _draft(shas: list[str], first_turn: str, rho: float = 0.75) -> ReleaseDraft:
    rows = [
        {
            "sample_id": f"s{i}",
            "source": "gqa",
            "source_id": str(i),
            "domain": "General QA",
            "question": "What animal is shown?",
            "answers": ["cat"],
            "image": shas[0],
            "format": "multi_turn",
            "depth": 1,
            "conversation": [
                {"turn": 1, "image": shas[0], "text": first_turn},
                {"turn": 2, "image": shas[1], "text": LAST},
            ],
            "meta": "{}",
        }
        for i in range(3)
    ]
    dialogues = [
        {
            "sample_id": r["sample_id"],
            "source": "gqa",
            "source_id": r["source_id"],
            "domain": "General QA",
            "question": r["question"],
            "answers": ["cat"],
            "image": shas[0],
            "origin": "built",
            "student_turns": 2,
            "dialogue": [
                {"answer": "a dog", "score": 3, "feedback": "No."},
                {"answer": "a cat", "score": 10, "feedback": "Yes."},
            ],
            "trajectory": r["conversation"],
            "fate": "multi_turn",
            "reason": None,
        }
        for r in rows
    ]
    return ReleaseDraft(
        kind=KIND,
        version="1.0.0",
        parent=None,
        tables={
            "trajectories": pa.Table.from_pylist(rows, schema=TRAJECTORY),
            "dialogues": pa.Table.from_pylist(dialogues, schema=DIALOGUE),
        },
        ledger=ledger_table([], "r"),
        quarantine=QUARANTINE.empty_table(),
        config={"reflectv": {"rho": rho}},
        models=[],
        judge={"name": "lexical-v1"},
        components={"grounding": "boxes:x"},
        source_files=[],
        counts={},
        statistics={},
        seed=0,
    )


def test_good_release_passes(tmp_path) -> None:
    store, shas = b.make_store(tmp_path / "images")
    good = render_turn("a dog", THINK, tool_call(True, "long whiskers", "red", "point"))
    path = write_release(_draft(shas, good), tmp_path / "releases", store)
    result = json.loads((path / "quality" / "validation.json").read_text())
    assert result["success"] and set(result["results"]) == {"sft", "trajectories", "composition", "dialogues"}


def test_depth_must_count_reflective_rounds(tmp_path) -> None:
    store, shas = b.make_store(tmp_path / "images")
    draft = _draft(shas, render_turn("a dog", THINK, tool_call(True, "long whiskers", "red", "point")))
    rows = [dict(r, depth=2) for r in draft.tables["trajectories"].to_pylist()]  # student turns, not rounds
    draft.tables["trajectories"] = pa.Table.from_pylist(rows, schema=TRAJECTORY)
    with pytest.raises(ReleaseInvalid, match="depth_is_reflective_rounds"):
        write_release(draft, tmp_path / "releases", store)


@pytest.mark.parametrize(
    "turn, rule",
    [
        (
            render_turn("a dog", THINK, tool_call(True, "long whiskers", "blue", "point")),
            "turns_breaking_color_in_think",
        ),
        (render_turn("a dog", THINK, tool_call(True, "long whiskers", "red", "star")), "turns_breaking_mark_type_enum"),
        (render_turn("a dog", THINK, tool_call(False)), "turns_breaking_flag"),
        ("<answer>a dog</answer><think>" + THINK + "</think>", "turns_breaking_structure"),
    ],
)
def test_a_broken_turn_fails_validation_with_its_rule(tmp_path, turn, rule) -> None:
    store, shas = b.make_store(tmp_path / "images")
    with pytest.raises(ReleaseInvalid) as error:
        write_release(_draft(shas, turn), tmp_path / "releases", store)
    assert rule in str(error.value) and "sample_id ['s0', 's1', 's2']" in str(error.value)
    assert not (tmp_path / "releases" / "reflectv" / "1.0.0").exists()


def test_share_below_rho_fails(tmp_path) -> None:
    store, shas = b.make_store(tmp_path / "images")
    draft = _draft(shas, render_turn("a dog", THINK, tool_call(True, "long whiskers", "red", "point")), rho=0.75)
    rows = draft.tables["trajectories"].to_pylist()
    pairs = [
        dict(
            r, sample_id=f"p{i}", format="single_turn", conversation=[dict(r["conversation"][1], turn=1, image=shas[0])]
        )
        for i, r in enumerate(rows)
    ]
    draft.tables["trajectories"] = pa.Table.from_pylist(rows + pairs, schema=TRAJECTORY)
    with pytest.raises(ReleaseInvalid, match="composition"):
        write_release(draft, tmp_path / "releases", store)
