"""Kestrel on MME-Hallucination end to end (seed 000, Table 2): MME's four hallucination
subtasks in the published release-folder layout ingested into a pope release (dataset mme),
then evaluated plain and through Kestrel with the MME fixtures' scripted model, which cannot
see and says Yes to everything: plain it gets one question of each image right (50 per
subtask); Kestrel's grounder (the POPE fixtures' boxes) and the model's verification correct
every wrong Yes, so each subtask scores 200, beside the initial answers' 50."""

from __future__ import annotations

import json

import polars as pl
import pytest

from mmcurate.releases.reader import open_release
from tests.flows import flowkit

pytestmark = pytest.mark.slow

SUBTASKS = ["existence", "count", "position", "color"]


@pytest.fixture(scope="module")
def run(tmp_path_factory, fixtures_root, prefect_harness):
    _, _, release, runs = flowkit.pope_runs(
        tmp_path_factory,
        "mme",
        lvlm=fixtures_root / "mme/kestrel_models/lvlm.jsonl",
        grounding=f"boxes:{fixtures_root}/pope/objects",
        pope={"sources": [{"name": "mme", "root": str(fixtures_root / "mme/MME_Benchmark_release_version")}]},
    )
    return release, runs


def test_the_four_subtasks_are_one_release(run) -> None:
    release, _ = run
    probes = open_release(release).frame("probes")
    assert set(probes["dataset"]) == {"mme"} and sorted(set(probes["split"])) == sorted(SUBTASKS)
    pairs = probes.group_by(["split", "image_file"]).agg(pl.col("label").sort()).rows()
    assert len(pairs) == 7 and all(labels == ["no", "yes"] for _, _, labels in pairs)  # every image's pair whole
    quarantine = pl.read_parquet(str(release / "quarantine.parquet"))
    assert quarantine.height == 4


def test_plain_and_kestrel_mme_scores(run) -> None:
    _, runs = run
    plain = {r["subtask"]: r for r in pl.read_parquet(str(runs["plain"] / "mme_scores.parquet")).to_dicts()}
    assert [plain[s]["answer_score"] for s in SUBTASKS] == [50.0] * 4  # a Yes to everything: 50 + 0
    assert plain["MME score"]["answer_score"] == 200.0
    kestrel = {r["subtask"]: r for r in pl.read_parquet(str(runs["kestrel"] / "mme_scores.parquet")).to_dicts()}
    assert [(kestrel[s]["initial_score"], kestrel[s]["answer_score"]) for s in SUBTASKS] == [(50.0, 200.0)] * 4
    assert kestrel["MME score"]["answer_score"] == 800.0
    table = (runs["kestrel"] / "table.md").read_text()
    assert "## MME-Hallucination (MME score)" in table and "| MME score |" in table and "+600.00" in table
    metrics = pl.read_parquet(str(runs["kestrel"] / "metrics.parquet"))
    # Table 2's order, as the MME table; no POPE probe, so no "all" row (issue 43 item 7)
    assert metrics["split"].to_list() == SUBTASKS
    answers = pl.read_parquet(str(runs["kestrel"] / "answers.parquet"))
    claimed = {r["split"]: json.loads(r["trace"])["claim_type"] for r in answers.to_dicts()}
    assert claimed == {"existence": "existence", "count": "count", "position": "position", "color": "colour"}
