"""POPE end to end on the bundled fixtures: the curation flow (published files and probes built
from object annotations), a validated release, then the evaluation plain and through Kestrel
with the fixtures' scripted vision model, compare-evals of the two (Figure 4's transitions)
and ``mmcurate why`` on a Kestrel item.

The scripted model answers Yes to every probe but flag and tower; Kestrel's grounder (the
fixtures' scripted detector, which reads no label file) finds every object but the tripod and
takes something on the astronaut for a camera. So Kestrel corrects every wrong Yes about an
absent object and every wrong No about a present flag or tower, breaks the right Yes about
the tripod it cannot find and keeps the wrong Yes about the camera it imagines. Grounding from
the annotated boxes the probes were built from is refused unless asked for as an upper bound
(issue 32 item 15)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from mmcurate.releases.manifest import recorded_validation
from mmcurate.releases.reader import open_release
from mmcurate.releases.verify import verify_release
from tests.flows import flowkit
from tests.releases.cli_helpers import run_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory, fixtures_root, prefect_harness):
    fx = fixtures_root / "pope"
    return flowkit.pope_runs(
        tmp_path_factory,
        "pope",
        lvlm=fx / "kestrel_models/lvlm.jsonl",
        grounding=f"detector:{fx}/detector/rules.jsonl",
        models={"blind": {"backend": "scripted", "script": str(fx / "kestrel_models/plain.jsonl")}},
        pope={
            "sources": [
                {"name": "pope", "root": str(fx / "published")},
                {
                    "name": "pope_objects",
                    "root": str(fx / "objects"),
                    "options": {"dataset": "built", "sample_num": 2, "seed": 13},
                },
            ],
            "seed": 5,
        },
    )


def test_release_is_valid_balanced_and_explains_itself(run) -> None:
    _, _, path, _ = run
    assert verify_release(path).ok and recorded_validation(path)["success"]
    release = open_release(path)
    probes = release.frame("probes")
    counts = probes.group_by(["split", "label"]).len().sort(["split", "label"]).rows()
    # built: 8 + 8 per split; published: random 3 + 3 (one "no" dropped to balance), adversarial 2 + 2
    assert counts == [
        ("adversarial", "no", 10),
        ("adversarial", "yes", 10),
        ("popular", "no", 8),
        ("popular", "yes", 8),
        ("random", "no", 11),
        ("random", "yes", 11),
    ]
    assert set(probes["origin"]) == {"published", "built"}
    ledger = pl.from_arrow(release.ledger)
    assert ledger.filter(pl.col("verdict") == "drop")["check"].to_list() == ["pope.balance.v1"]
    quarantine = pl.read_parquet(str(path / "quarantine.parquet"))
    assert (
        quarantine.height == 5 and "malformed record: label 'maybe' is not yes or no" in quarantine["reason"].to_list()
    )
    # one row per (dataset, split), as POPE reports them: the repository clone's coco and aokvqa files
    # (output/coco/, output/seem/aokvqa/) and the built probes, never pooled
    splits = {(r["dataset"], r["split"]): r for r in release.manifest.statistics["splits"]}
    assert sorted(splits) == [
        ("aokvqa", "adversarial"),
        ("built", "adversarial"),
        ("built", "popular"),
        ("built", "random"),
        ("coco", "random"),
    ]
    assert splits[("coco", "random")] == {
        "dataset": "coco",
        "split": "random",
        "probes": 6,
        "yes": 3,
        "no": 3,
        "images": 2,
    }
    assert probes.filter(pl.col("source_id") == "coco/random/8")["image_file"].to_list() == ["COCO_fixture_000002.jpg"]
    assert set(probes.filter(pl.col("source") == "pope")["dataset"]) == {"coco", "aokvqa"}
    assert "POPE probes object hallucination" in (path / "README.md").read_text()
    sections = flowkit.report_sections(path)
    assert not set(flowkit.DEFLECTION_SECTIONS) & set(sections) and len(sections) == len(set(sections)), sections


def test_kestrel_corrects_hallucinations_and_names_its_stand_ins(run) -> None:
    _, _, release, runs = run
    plain = pl.read_parquet(str(runs["plain"] / "answers.parquet"))
    kestrel = pl.read_parquet(str(runs["kestrel"] / "answers.parquet"))
    n = open_release(release).table("probes").num_rows
    assert plain.height == kestrel.height == n and set(kestrel["system"]) == {"kestrel"}
    wrong = kestrel.filter(pl.col("grade") == "INCORRECT")
    # the only errors left: the tripod the detector misses (answered Yes at first: broken) and the
    # camera it imagines on the astronaut (a wrong Yes kept)
    assert set(wrong["object"]) == {"tripod", "camera"}
    assert set(wrong.filter(pl.col("object") == "tripod")["label"]) == {"yes"} and set(wrong["initial"]) == {"Yes"}
    assert set(wrong.filter(pl.col("object") == "camera")["label"]) == {"no"}
    assert kestrel.filter(pl.col("changed") & (pl.col("grade") == "CORRECT")).height > 0  # some corrected
    assert (kestrel["initial"].str.to_lowercase() == plain["answer"]).all()  # its first answer is the plain one
    table = (runs["kestrel"] / "table.md").read_text()
    assert table.startswith(f"# lvlm on pope {open_release(release).version} (kestrel system)")
    assert "## Initial -> final answer (Figure 4)" in table and "| all | broken |" in table
    assert "a scripted detector (" in table and "stated false alarms: camera; stated misses: tripod" in table
    assert "it reads no label file" in table
    assert "evaluated model: scripted model 'lvlm' (rules in lvlm.jsonl) stands in for a vision model." in table
    assert "oracle grounding" not in table
    # issue 43 item 7: SAM3's thresholds (seed 000 4.1) named in the notes and the run record
    assert "SAM3's thresholds (4.1): detection 0.5, existence recheck 0.35" in table
    assert "(this one scores none, so they leave nothing out)" in table  # the fixtures' rules carry no score
    record = json.loads((runs["kestrel"] / "release.json").read_text())
    assert record["detector"] == {"detection_threshold": 0.5, "recheck_threshold": 0.35}
    assert "detector" not in json.loads((runs["plain"] / "release.json").read_text())
    metrics = pl.read_parquet(str(runs["kestrel"] / "metrics.parquet"))
    assert sorted(metrics.select("dataset", "split").rows()) == [
        ("all", "all"),
        ("aokvqa", "adversarial"),
        ("built", "adversarial"),
        ("built", "popular"),
        ("built", "random"),
        ("coco", "random"),
    ]
    assert "| Dataset | Split |" in table and "| coco | random |" in table
    for name in ("plain", "kestrel"):
        row = pl.read_parquet(str(runs[name] / "metrics.parquet")).filter(pl.col("split") == "all").row(0, named=True)
        assert row["n"] == n and row["tp"] + row["fp"] + row["tn"] + row["fn"] == n
    trace = json.loads(kestrel.filter(pl.col("object") == "tripod")["trace"][0])
    assert trace["rounds"][0]["evidence"][0]["text"].startswith("The grounding agent found 0 instances of 'tripod'")


def test_grounding_from_the_probes_own_annotations_is_oracle_grounding(run, tmp_path, fixtures_root) -> None:
    """Issue 32 item 15: the annotated boxes the labels were built from are refused; with
    --oracle-grounding the run is titled an upper bound."""
    from mmcurate.evaluation.failures import EvaluationError
    from mmcurate.flows.evaluate import evaluate_release

    _, config, release, _ = run
    oracle = yaml.safe_load(config.read_text())
    oracle["evaluation"]["pope"]["kestrel"]["grounding"] = f"boxes:{fixtures_root}/pope/objects"
    (tmp_path / "oracle.yaml").write_text(yaml.safe_dump(oracle))
    with pytest.raises(EvaluationError, match="reads the annotations the POPE labels come from"):
        evaluate_release(
            release=str(release),
            model="lvlm",
            config=str(tmp_path / "oracle.yaml"),
            options={"system": "kestrel"},
            out=str(tmp_path / "refused"),
        )
    assert not (tmp_path / "refused").exists()
    out = Path(
        evaluate_release(
            release=str(release),
            model="lvlm",
            config=str(tmp_path / "oracle.yaml"),
            options={"system": "kestrel", "oracle_grounding": True},
            out=str(tmp_path / "upper"),
        )
    )
    assert (
        (out / "table.md")
        .read_text()
        .startswith("# lvlm on pope 1.0.0 (kestrel system, oracle grounding (upper bound))")
    )


def test_compare_evals_shows_corrected_and_broken(run, capsys, monkeypatch) -> None:
    _, _, _, runs = run
    code, out, _ = run_cli(capsys, monkeypatch, "compare-evals", str(runs["plain"]), str(runs["kestrel"]))
    assert code == 0, out
    kestrel = pl.read_parquet(str(runs["kestrel"] / "answers.parquet"))
    first_right = pl.col("initial").str.to_lowercase() == pl.col("label")
    broken = kestrel.filter((pl.col("grade") == "INCORRECT") & first_right).height
    kept_wrong = kestrel.filter((pl.col("grade") == "INCORRECT") & ~first_right).height
    corrected = kestrel.filter((pl.col("grade") == "CORRECT") & pl.col("changed")).height
    assert f"| all | corrected | {corrected} |" in out and f"| all | broken | {broken} |" in out
    assert f"| all | kept wrong | {kept_wrong} |" in out and kept_wrong > 0 and corrected > 0
    assert "| Dataset / Split | Transition |" in out and " / adversarial | corrected |" in out


def test_why_prints_a_kestrel_items_rounds(run, capsys, monkeypatch) -> None:
    _, _, _, runs = run
    answers = pl.read_parquet(str(runs["kestrel"] / "answers.parquet"))
    sample = answers.filter(pl.col("changed") & (pl.col("grade") == "CORRECT"))["sample_id"][0]
    code, out, _ = run_cli(capsys, monkeypatch, "why", str(runs["kestrel"]), sample)
    assert code == 0
    assert f"{sample} in the evaluation run" in out and "initial: " in out and "round 1: claim c1 (existence)" in out
    assert "e_count_" in out and "verifier: c1 " in out and "(existence threshold 0.82)" in out
    assert "gate open; proposed " in out and "stopped: " in out
    code, out, err = run_cli(capsys, monkeypatch, "why", str(runs["kestrel"]), "nope")
    assert code == 2 and "unknown item 'nope'" in err and out == ""  # no heading before the error (issue 31.21)


def test_a_rerun_returns_the_release(run) -> None:
    from mmcurate.flows.pope.curate import pope

    _, config, release, _ = run
    assert Path(pope(config=str(config))) == release
    assert sorted(p.name for p in release.parent.iterdir()) == ["1.0.0"]


def test_a_run_it_cannot_make_is_refused_before_any_flow(run, capsys, monkeypatch, tmp_path) -> None:
    def no_flow(call):
        raise AssertionError("the command started a flow run")

    monkeypatch.setattr("mmcurate.cli.run.run_flow", no_flow)
    _, config, release, _ = run
    ungrounded = yaml.safe_load(config.read_text())
    del ungrounded["evaluation"]
    (tmp_path / "ungrounded.yaml").write_text(yaml.safe_dump(ungrounded))
    for extra, message in (
        ((str(config), "--model", "blind"), "model 'blind' cannot see them (vision: false)"),
        (
            (str(tmp_path / "ungrounded.yaml"), "--model", "lvlm", "--system", "kestrel"),
            "--system kestrel needs a grounding agent",
        ),
    ):
        code, _, err = run_cli(capsys, monkeypatch, "evaluate", str(release), "--config", *extra)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_lmms_eval_tasks_give_the_plain_runs_numbers(run, tmp_path) -> None:
    """The release's lmms-eval tasks (one per dataset and split), fed the plain run's replies
    through lmms-eval's own task objects, compute the run's metrics: POPE's reading and metrics once."""
    if importlib.util.find_spec("lmms_eval") is None:  # never imported here: see tests/releases/lmms_helpers.py
        pytest.skip("lmms-eval is not installed (pip install 'mmcurate[test]')")
    from mmcurate.evaluation.pope.harness import POPE_METRICS
    from mmcurate.releases.lmms_export import export_release, group_name
    from mmcurate.releases.pope.draft import KIND
    from tests.releases.lmms_helpers import harness_numbers

    _, _, release, runs = run
    opened = open_release(release)
    export_release(opened, KIND, tmp_path / "tasks")
    replies = dict(pl.read_parquet(str(runs["plain"] / "answers.parquet")).select("sample_id", "reply").iter_rows())
    group = group_name("pope", opened.version)
    numbers = harness_numbers(tmp_path / "tasks", group, {"*": replies}, tmp_path)
    expected = {
        (row["dataset"], row["split"]): row
        for row in pl.read_parquet(str(runs["plain"] / "metrics.parquet")).to_dicts()
        if row["dataset"] != "all"
    }
    assert len(expected) > 3 and set(numbers) == {f"{group}_{d}_{s}" for d, s in expected}  # several datasets
    for (dataset, split), row in expected.items():
        for metric in POPE_METRICS:
            assert numbers[f"{group}_{dataset}_{split}"][metric] == pytest.approx(row[metric]), (dataset, split, metric)
