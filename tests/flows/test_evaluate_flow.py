"""The four-scenario evaluation as a flow run, on the shared scripted release and the
scripted reader: every sample answered in every scenario and n, the Table-4 markdown printed
by the flow run, the metrics-vs-negatives plot written."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from mmcurate.releases.reader import open_release
from tests.flows import flowkit

pytestmark = pytest.mark.slow


def test_evaluation_answers_every_scenario_and_publishes_the_table(
    tmp_path_factory, fixtures_root, prefect_harness, monkeypatch
):
    import json

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey

    from mmcurate.flows.evaluate import evaluate_release
    from mmcurate.models import client as model_client

    opened = []  # the backends the run opened: the scripted one records each request's sampling parameters
    real = model_client.make_backend
    monkeypatch.setattr(model_client, "make_backend", lambda *a, **k: opened.append(real(*a, **k)) or opened[-1])
    home, release = flowkit.baseline(tmp_path_factory, fixtures_root)
    n = len(open_release(release).sample_ids)
    assert n > 0
    state = evaluate_release(
        release=str(release),
        model="vlm-reader",
        config=str(home / "config.yaml"),
        options={"n_negatives": [1, 2]},
        return_state=True,
    )
    out = Path(state.result())
    table = (out / "table.md").read_text()
    for scenario in ("parametric", "oracle", "realistic", "adversarial"):
        assert f"| {scenario} |" in table
    answers = pl.read_parquet(out / "answers.parquet")
    assert answers.height == n * 6  # parametric, oracle, then realistic and adversarial at n=1 and n=2
    assert set(answers["grade"].to_list()) <= {"CORRECT", "INCORRECT", "NOT_ATTEMPTED"}
    # the reader answers from the gold evidence: every oracle answer is correct
    assert answers.filter(pl.col("scenario") == "oracle")["grade"].to_list() == ["CORRECT"] * n
    assert (out / "metrics_vs_negatives.png").stat().st_size > 1000
    # Table 4 reads n = 2 only: every sample counts once per scenario; the sweep has n = 1 and 2
    table4 = pl.read_parquet(out / "metrics_by_scenario.parquet")
    assert table4["n"].to_list() == [n] * 4
    sweep = pl.read_parquet(out / "metrics_by_negatives.parquet")
    assert sweep.filter(pl.col("scenario") == "realistic")["n_negatives"].to_list() == [1, 2]
    # the paper's decoding settings (seed 003, 4.1) reach every request of the evaluated model and the notes
    asked = [params for backend in opened if backend.spec.name == "vlm-reader" for params, _ in backend.asked]
    assert asked and {(p["temperature"], p["top_p"], p["repetition_penalty"]) for p in asked} == {(0.2, 1.0, 1.05)}
    assert (
        "Decoding: temperature 0.2, top-p 1.0, repetition penalty 1.05, from evaluation.deflectionbench.decoding"
        in table
    )
    assert "Not applied: temperature, top-p, repetition penalty (vlm-reader: a scripted model" in table
    record = json.loads((out / "release.json").read_text())["decoding"]
    assert (record["reading"], record["temperature"], record["repetition_penalty"]) == ("evaluation", 0.2, 1.05)
    # the run's table is its markdown artifact in Prefect (the command line prints it on stdout)
    with get_client(sync_client=True) as client:
        [artifact] = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=["evaluation"]),
                flow_run_id=ArtifactFilterFlowRunId(any_=[state.state_details.flow_run_id]),
            )
        )
    assert artifact.data == table
