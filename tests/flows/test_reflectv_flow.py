"""The ReflectV flow end to end on scripted models (student, teacher, rewriter, verifier) and the
bundled fixtures: the release, its Figure 5 statistics, loading it with datasets and polars, a
rerun that makes no model call."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from datasets import load_dataset

from mmcurate.annotation.reflectv.turns import conversation_defects
from mmcurate.core.text import find_answer
from mmcurate.models.cache import ResponseCache
from mmcurate.releases.manifest import recorded_validation
from mmcurate.releases.reader import open_release
from mmcurate.releases.verify import verify_release
from tests.flows import flowkit

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory, fixtures_root, prefect_harness):
    from mmcurate.flows.reflectv.curate import reflectv

    home = tmp_path_factory.mktemp("reflectv")
    config = flowkit.reflectv_config(home, fixtures_root, task_runner={"shard_size": 5})
    return home, config, Path(reflectv(config=str(config)))


def test_release_is_valid_and_explains_itself(run) -> None:
    home, _, path = run
    assert path == home / "releases" / "reflectv" / "1.0.0"
    assert verify_release(path).ok and recorded_validation(path)["success"]
    release = open_release(path)
    stats = release.manifest.statistics
    assert [r["remaining"] for r in stats["funnel"]] == [17, 13, 12, 9, 12]
    assert {r["domain"]: (r["original"], r["released"]) for r in stats["domains"]} == {
        "General QA": (8, 6),
        "Scene text": (3, 2),
        "Document": (3, 1),
        "Chart": (3, 3),
    }
    # Figure 5c: reflective rounds (a QA pair has none, a chain of n answers n - 1)
    assert stats["depth"] == [
        {"depth": 0, "multi_turn": 0, "single_turn": 3},
        {"depth": 1, "multi_turn": 6, "single_turn": 0},
        {"depth": 2, "multi_turn": 3, "single_turn": 0},
    ]
    assert stats["composition"] == [
        {"rho": 0.75, "rho_rule": "collapse", "multi_turn": 9, "single_turn": 3, "share": 0.75}
    ]
    notes = " ".join(release.manifest.notes)
    assert "scripted model 'student'" in notes and "annotated regions" in notes and "lexical judge" in notes
    assert "captions: fixed sentences (template-v1) stand in" in notes
    readings = {r["setting"]: r["value"] for r in stats["readings"]}
    assert readings == {
        "collapse_revealing_feedback": "false",
        "rho_rule": "collapse (rho 0.75)",
        "dense-perception keywords": "question phrase",
        "caption_order": "after_rewrite",
        "depth": "reflective rounds",
    }
    assert release.manifest.components["captions"] == "template-v1"
    assert release.manifest.exports["sft"]["records"] == 12
    assert release.manifest.components["grounding"].startswith("boxes:")
    assert {"plots/funnel.png", "plots/distribution-0.png", "plots/distribution-1.png"} <= set(release.manifest.files)
    card = (path / "README.md").read_text()
    assert "| dense-perception keywords | question phrase |" in card and "(002 section 4.3)" in card
    assert "ReflectV is a training set" in card and "split: train" in card and "scripted model" in card


def test_every_drop_has_its_reason(run) -> None:
    _, _, path = run
    dialogues = pl.read_parquet(str(path / "data" / "dialogues-*.parquet"))
    fates = dict(zip(dialogues["source_id"].to_list(), zip(dialogues["fate"].to_list(), dialogues["reason"].to_list())))
    assert fates["050455"] == ("discarded", "scores not strictly ascending (plateau at turn 2)")
    assert fates["34603"] == ("discarded", "scores not strictly ascending (dip at turn 2)")
    assert fates["49154"] == ("discarded", "final score is not 10 (9)")
    assert fates["49155"] == ("discarded", "final answer disagrees with the ground truth (INCORRECT)")
    assert fates["test/human/1"] == ("single_turn", "visual: the marks do not show 'value of bar for 2020' (turn 1)")
    assert fates["040355"] == ("single_turn", "single-turn dialogue")
    issues = dict(zip(dialogues["source_id"].to_list(), dialogues["chain_issue"].to_list()))
    assert [sid for sid, issue in issues.items() if issue] == ["test/human/1"]
    assert dialogues.filter(pl.col("origin") == "ingested").height == 3


def test_loads_with_datasets_and_polars(run) -> None:
    _, _, path = run
    ds = load_dataset("parquet", data_files={"train": str(path / "data" / "trajectories-*.parquet")}, split="train")
    assert ds.num_rows == 12
    chain = next(row for row in ds if row["format"] == "multi_turn" and row["depth"] == 2)
    images = [turn["image"] for turn in chain["conversation"]]
    assert images[0].tobytes() == chain["image"].tobytes() and images[1].tobytes() != images[0].tobytes()
    assert chain["conversation"][0]["text"].startswith("<answer>") and "<tool_call>" in chain["conversation"][0]["text"]
    via_card = load_dataset(str(path), "dialogues", split="train")
    assert via_card.num_rows == 17
    sft = load_dataset("json", data_files=str(path / "sft" / "conversations.jsonl"), split="train")
    assert sorted(sft["id"]) == sorted(ds["sample_id"])
    for record in sft:
        assert [m["role"] for m in record["messages"][1:]] == ["user", "assistant"] * (len(record["messages"]) // 2)
        assert all((path / "sft" / image).is_file() for image in record["images"])
    frame = pl.read_parquet(str(path / "data" / "trajectories-*.parquet"))
    assert frame["format"].value_counts().sort("format").rows() == [("multi_turn", 9), ("single_turn", 3)]
    for row in frame.to_dicts():
        assert conversation_defects([t["text"] for t in row["conversation"]], row["answers"]) == []


def test_no_turn_before_the_last_states_the_ground_truth(run) -> None:
    """Issue 43 item 2: the ChartQA chains (and every other) give the answer in their final turn only."""
    _, _, path = run
    frame = pl.read_parquet(str(path / "data" / "trajectories-*.parquet"))
    charts = frame.filter((pl.col("domain") == "Chart") & (pl.col("format") == "multi_turn")).to_dicts()
    assert charts and "Which year had the highest sales?" in [row["question"] for row in charts]
    for row in frame.to_dicts():
        turns = [t["text"] for t in row["conversation"]]
        assert all(find_answer(text, row["answers"]) < 0 for text in turns[:-1]), (row["question"], turns)


def test_rerun_makes_no_model_call(run) -> None:
    from mmcurate.flows.reflectv.curate import reflectv

    home, config, path = run
    cache = ResponseCache.open(f"sqlite:///{home / 'work' / 'responses.sqlite'}")
    before = cache.count()
    assert Path(reflectv(config=str(config))) == path
    assert cache.count() == before
    calls = json.loads((path / "manifest.json").read_text())["statistics"]["calls"]
    assert {r["model"] for r in calls} == {"student", "teacher", "rewriter", "verifier"}
