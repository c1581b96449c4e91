"""ReflectV re-curation on scripted models (issue 27.2): a new teacher scores the released
dialogues again (a trajectory whose scores break the rules is removed), a new verifier
checks the marks again (a no collapses the chain), rho is kept; the original teacher and
verifier are never asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmcurate.releases.manifest import recorded_validation
from mmcurate.releases.reader import open_release
from mmcurate.releases.verify import verify_release
from tests.flows import flowkit

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory, fixtures_root, prefect_harness) -> tuple[Path, Path, Path]:
    from mmcurate.flows.reflectv.curate import reflectv

    return flowkit.recurate_base(
        tmp_path_factory,
        "recurate-reflectv",
        reflectv,
        lambda home, models: flowkit.reflectv_config(home, fixtures_root, models=models),
        {
            "strict": {"backend": "scripted", "script": "strict.jsonl", "vision": True, "revision": "strict-1"},
            "critic": {
                "backend": "scripted",
                "script": "critic.jsonl",
                "default": "yes",
                "vision": True,
                "revision": "critic-1",
            },
            "nay": {"backend": "scripted", "script": "nay.jsonl", "default": "no", "vision": True, "revision": "nay-1"},
        },
    )


def teacher_rules(dialogues: list[dict], plateau: str) -> list[dict]:
    """A teacher that gives each released dialogue's turns their recorded scores (later turns'
    rules first: a turn's messages hold every earlier answer), except ``plateau``: 5 every turn."""
    rules = []
    for row in dialogues:
        for turn in reversed(row["dialogue"]):
            score = 5 if row["sample_id"] == plateau else turn["score"]
            rules.append(
                {
                    "when_all": [row["question"], f"Student answer: {turn['answer']}"],
                    "answer": f"Score: {score}\nFeedback: {turn['feedback']}",
                }
            )
    return rules


def test_new_teacher_and_verifier_recheck_the_trajectories(built, asked):
    from mmcurate.flows.recurate import recurate_release

    home, config, release = built
    parent = open_release(release)
    trajectories = parent.table("trajectories").to_pylist()
    chains = [r for r in trajectories if r["format"] == "multi_turn"]
    dropped, doubted = chains[0], chains[1]
    released = {r["sample_id"] for r in trajectories}
    dialogues = [r for r in parent.table("dialogues").to_pylist() if r["sample_id"] in released]
    (home / "strict.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in teacher_rules(dialogues, dropped["sample_id"]))
    )
    (home / "critic.jsonl").write_text(
        json.dumps({"when_all": [f"Question: {doubted['question']}"], "answer": "no"}) + "\n"
    )
    new = Path(
        recurate_release(release=str(release), add_model=["teacher=strict", "verifier=critic"], config=str(config))
    )
    assert set(asked) == {"strict", "critic"}  # the original teacher and verifier were not asked
    assert asked["strict"] == sum(len(r["dialogue"]) for r in dialogues)
    assert new == release.parent / "1.1.0" and verify_release(new).ok and recorded_validation(new)["success"]
    recurated = open_release(new)
    rows = {r["sample_id"]: r for r in recurated.table("trajectories").to_pylist()}
    removed = {r["sample_id"]: r["reason"] for r in recurated.manifest.removed}
    assert "drop by strict in v1.1.0 (plateau at turn 2 (5 -> 5))" in removed[dropped["sample_id"]]
    # the doubted chain became a QA pair, which stays: rho is reached by collapsing chains only (002 4.5)
    collapsed = rows[doubted["sample_id"]]
    assert (collapsed["format"], collapsed["depth"], len(collapsed["conversation"])) == ("single_turn", 0, 1)
    multi = sum(r["format"] == "multi_turn" for r in rows.values())
    assert multi == len(chains) - 2 and len(rows) == len(trajectories) - 1  # only the teacher's removal
    assert not [r for r in removed.values() if "surplus QA pair" in r]
    fates = {r["sample_id"]: r for r in recurated.table("dialogues").to_pylist()}
    assert fates[dropped["sample_id"]]["fate"] == "discarded"
    changelog = (new / "CHANGELOG.md").read_text()
    assert "teacher: `strict`; verifier: `critic`" in changelog
    for version in (release, new):  # ReflectV reports have no DeflectionBench section, and each section once
        sections = flowkit.report_sections(version)
        assert not set(flowkit.DEFLECTION_SECTIONS) & set(sections) and len(sections) == len(set(sections)), sections
    assert f"`{dropped['sample_id']}`" in changelog and "[model `strict`]" in changelog
    assert "critic" in fates[doubted["sample_id"]]["chain_issue"]
    assert f"`{doubted['sample_id']}`" in changelog and "`critic`" in changelog


def test_a_verifier_that_rejects_every_mark_collapses_every_chain_into_a_valid_release(built):
    """Issue 31 item 7: a re-checking verifier that answers no to every mark collapses every
    chain to a QA pair (002 section 4.5) and the release is valid (a collapsed chain's depth is 0,
    the validator's depth_is_reflective_rounds), where it used to fail its own validation."""
    from mmcurate.flows.recurate import recurate_release

    home, config, release = built
    parent = open_release(release).table("trajectories").to_pylist()
    new = Path(recurate_release(release=str(release), add_model=["verifier=nay"], config=str(config), version="1.2.0"))
    assert verify_release(new).ok and recorded_validation(new)["success"]
    rows = open_release(new).table("trajectories").to_pylist()
    assert rows and {(r["format"], r["depth"], len(r["conversation"])) for r in rows} == {("single_turn", 0, 1)}
    assert {r["sample_id"] for r in rows} == {r["sample_id"] for r in parent}  # collapsed, nothing dropped
