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


def test_evaluation_answers_every_scenario_and_publishes_the_table(tmp_path_factory, fixtures_root, prefect_harness):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey

    from mmcurate.flows.evaluate import evaluate_release

    home, release = flowkit.baseline(tmp_path_factory, fixtures_root)
    n = len(open_release(release).sample_ids)
    assert n > 0
    state = evaluate_release(release=str(release), model="vlm-reader", config=str(home / "config.yaml"),
                             options={"n_negatives": [1, 2]}, return_state=True)
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
    # the run's table is its markdown artifact in Prefect (the command line prints it on stdout)
    with get_client(sync_client=True) as client:
        [artifact] = client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["evaluation"]),
            flow_run_id=ArtifactFilterFlowRunId(any_=[state.state_details.flow_run_id])))
    assert artifact.data == table
