"""The plan against a real run: the scripted dry run (configs/dryrun.yaml) is curated, then
planned at the retention its release measured; the planned Stage I and III requests must
come within 15% of the requests the run made. The flow run carries the plan and the
plan-vs-spent table as artifacts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmcurate.core.config import load_config
from mmcurate.planning.bill import deflection_bill


@pytest.fixture(scope="module")
def dryrun(tmp_path_factory, dryrun_config, prefect_harness) -> tuple[Path, Path]:
    """(config, release) of one dry run of DeflectionBench on the bundled fixtures."""
    from mmcurate.flows.deflectionbench.curate import deflectionbench

    path = dryrun_config(tmp_path_factory.mktemp("dryrun"))
    return path, Path(deflectionbench(config=str(path)))


def _made(release: Path) -> dict[str, int]:
    """Requests per stage the run made: calls plus cache hits, from the release's calls table."""
    rows = json.loads((release / "manifest.json").read_text())["statistics"]["calls"]
    return {r["stage"]: r["calls"] + r["cache_hits"] for r in rows if r["step"] == "total"}


def test_planned_requests_are_within_15_percent_of_the_run(dryrun):
    config, release = dryrun
    plan = deflection_bill(load_config(config), retention=str(release))
    assert plan.samples == 80  # the ingests in the workdir, six sources
    made = _made(release)
    planned = {stage: sum(r.requests for r in plan.rows if r.stage == stage) for stage in ("I", "III")}
    for stage in ("I", "III"):
        assert abs(planned[stage] - made[stage]) <= 0.15 * made[stage], (stage, planned, made)
    both = planned["I"] + planned["III"]
    assert abs(both - (made["I"] + made["III"])) <= 0.15 * (made["I"] + made["III"])
    released = json.loads((release / "manifest.json").read_text())["counts"]["rows"]["test"]
    assert round(plan.funnel[-1][1]) == released


def test_the_flow_run_records_its_plan_beside_what_it_spent(dryrun):
    from prefect.artifacts import Artifact

    _, release = dryrun
    planned = Artifact.get("deflectionbench-plan")
    spent = Artifact.get("deflectionbench-plan-vs-spent")
    assert planned is not None and spent is not None
    rows = json.loads(spent.data) if isinstance(spent.data, str) else spent.data
    made = sum(r["requests"] for r in rows)
    assert made == sum(_made(release).values())
    assert {r["model"] for r in rows} == {"vlm-reader", "llm-guesser"}
    assert all(r["planned_requests"] > 0 for r in rows)
