"""Judge agreement (DeflectionBench Table 7, RefLVQA's evaluator checks) and ReflectV's blind
Table 6 as Label Studio projects, file level (no server): the exported tasks and configs, the
same labels given through Label Studio's JSON export and through the CSV path giving the same
outputs, the CSV path's refusals, and push failing fast where nothing listens."""

from __future__ import annotations

import json
import socket
import threading
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from mmcurate.cli.app import app
from mmcurate.core.errors import MmcurateError
from mmcurate.review import label_studio_judges as judges_ls
from mmcurate.review.deflectionbench.judges import GRADES
from mmcurate.review.deflectionbench.judges import REVIEW as DEFLECTION
from mmcurate.review.label_studio import LOCAL_FILES, SERVER_DATA, TASKS, push_project
from mmcurate.review.reflectv import label_studio as trajectories_ls
from mmcurate.review.reflectv.trajectories import CRITERIA, import_trajectory_ratings, read_key
from mmcurate.review.reflvqa.judges import REVIEW as REFLVQA
from tests.releases.release_builders import image_bytes
from tests.review.test_judge_batches import JUDGE_A, JUDGE_B, SCENARIOS, reflvqa, result, write_release  # noqa: F401
from tests.review.test_trajectory_batches import built  # noqa: F401  (the ReflectV release fixture)

PEOPLE = {1: "alice@example.org", 2: "bob@example.org"}


def ls_export(tasks: list[dict], choose) -> list[dict]:
    """Label Studio's JSON export of ``tasks`` (as exported) annotated by ``PEOPLE``:
    ``choose(task data, e-mail)`` -> {control name: choice}."""
    out = []
    for number, task in enumerate(tasks, start=1):
        annotations = [
            {
                "id": 100 * number + user,
                "completed_by": {"id": user, "email": email},
                "was_cancelled": False,
                "result": [
                    {"from_name": name, "to_name": "x", "type": "choices", "value": {"choices": [v]}}
                    for name, v in choose(task["data"], email).items()
                ],
            }
            for user, email in PEOPLE.items()
        ]
        out.append({"id": number, "data": task["data"], "annotations": annotations})
    return out


def csv_files(batch: Path, folder: Path, choose, fields: tuple[str, ...]) -> list[Path]:
    """The same labels written into the CSV path's batch rows, one file per person."""
    rows = [json.loads(line) for line in (batch / "batch.jsonl").read_text().splitlines()]
    folder.mkdir()
    files = []
    for email in PEOPLE.values():
        filled = [{**row, **{f: choose(row, email)[f] for f in fields}, "annotator": email} for row in rows]
        files.append(folder / f"{email}.jsonl")
        files[-1].write_text("".join(json.dumps(r) + "\n" for r in filled))
    return files


def refused(call, needle: str) -> None:
    with pytest.raises(MmcurateError) as caught:
        call()
    assert needle in str(caught.value) and "\n" not in str(caught.value), str(caught.value)


def edited(export: list[dict], *path: Any, value: Any) -> list[dict]:
    """A copy of ``export`` with the value at ``path`` (its keys and indexes, in order) set to ``value``."""
    out = json.loads(json.dumps(export))
    *where, last = path
    node = out
    for key in where:
        node = node[key]
    node[last] = value
    return out


def save(path: Path, export: list[dict]) -> Path:
    path.write_text(json.dumps(export))
    return path


# ---------------------------------------------------------------------------- judges
def deflection_release(root: Path) -> tuple[Path, list[Path]]:
    """A DeflectionBench release whose questions have images, and model A's and B's evaluations."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mmcurate.evaluation.deflectionbench.scenarios import RESULTS

    samples = [
        {
            "sample_id": f"s{i}",
            "question": f"Question {i}?",
            "answers": [f"gold {i}"],
            "images": [{"bytes": image_bytes(i), "path": f"img{i}.png"}],
        }
        for i in range(12)
    ]
    release = write_release(root / "release", "deflectionbench", {"test": samples})
    runs = []
    for model, grades in (("A", JUDGE_A), ("B", JUDGE_B)):
        folder = root / f"eval-{model}"
        folder.mkdir()
        rows = [result(f"s{i}", SCENARIOS[i % 4], g, model) for i, g in enumerate(grades)]
        pq.write_table(pa.Table.from_pylist(rows, schema=RESULTS), folder / "answers.parquet")
        runs.append(folder)
    return release, runs


@pytest.fixture
def deflection(tmp_path):
    return deflection_release(tmp_path)


def grade_by(data: dict, email: str) -> dict[str, str]:
    """A person's SimpleQA label: they differ with the judge and with each other on some items."""
    index = int(data["item_id"].split("|")[1][1:])
    return {"label": GRADES[(index + (email == "bob@example.org" and index % 4 == 0)) % 3]}


def test_judge_project_shows_the_question_image_gold_and_answer_with_the_csv_labels(deflection, tmp_path):
    release, runs = deflection
    out = tmp_path / "review"
    batch = judges_ls.export_project(DEFLECTION, release, runs, out, n=4, seed=3)
    tasks = json.loads((out / TASKS).read_text())
    assert len(tasks) == batch.items == 8
    config = ET.fromstring((out / "judges.xml").read_text())
    [control] = config.iter("Choices")
    assert control.get("name") == "label" and control.get("value") == "$choices" and control.get("required") == "true"
    shown = {t.get("value") for t in config.iter("Text")} | {i.get("value") for i in config.iter("Image")}
    assert shown == {"$model", "$scenario", "$question", "$gold_answers", "$answer", "$image"}
    data = tasks[0]["data"]
    assert [c["value"] for c in data["choices"]] == list(GRADES)  # the CSV path's vocabulary
    assert data["image"].startswith(LOCAL_FILES + "images/") and (out / data["image"][len(LOCAL_FILES) :]).is_file()
    assert not {"decision", "grade", "by_rule", "group"} & set(data)  # blind to the judge
    batch_ids = [json.loads(line)["item_id"] for line in (out / "batch.jsonl").read_text().splitlines()]
    assert [t["data"]["item_id"] for t in tasks] == batch_ids


def test_table7_from_label_studio_is_the_csv_paths(deflection, tmp_path):
    release, runs = deflection
    out = tmp_path / "review"
    judges_ls.export_project(DEFLECTION, release, runs, out)
    tasks = json.loads((out / TASKS).read_text())
    export = save(tmp_path / "export.json", ls_export(tasks, grade_by))
    via_ls = judges_ls.import_project(DEFLECTION, release, runs, [export], tmp_path / "ls")
    via_csv = DEFLECTION.import_labels(
        release, runs, csv_files(out, tmp_path / "csv-in", grade_by, ("label",)), tmp_path / "csv"
    )
    assert via_ls.annotators == sorted(PEOPLE.values()) and via_ls.items == 12
    assert via_ls.report == via_csv.report and via_ls.markdown == via_csv.markdown
    assert (tmp_path / "ls" / "judge_agreement.json").read_text() == (
        tmp_path / "csv" / "judge_agreement.json"
    ).read_text()
    assert via_ls.report["ties"] == 3 and len(via_ls.report["per_model"]) == 2  # A s0, s4 and B s0 split the two


def rate_by(data: dict, email: str) -> dict[str, str]:
    metric, unit = data["item_id"].split("|")[4:]
    if metric == "relevance":
        return {"rating": str(3 + int(unit) + (email == "bob@example.org"))}
    return {"rating": ("1", "0.5", "0")[(int(unit) + (email == "bob@example.org")) % 3]}


def test_reflvqa_evaluator_check_from_label_studio_is_the_csv_paths(reflvqa, tmp_path):  # noqa: F811
    release, folder = reflvqa
    out = tmp_path / "review"
    judges_ls.export_project(REFLVQA, release, [folder], out)
    tasks = json.loads((out / TASKS).read_text())
    scales = {t["data"]["metric"]: [c["value"] for c in t["data"]["choices"]] for t in tasks}
    assert scales == {"groundedness": ["1", "0.5", "0"], "relevance": ["1", "2", "3", "4", "5", "6", "7"]}
    export = save(tmp_path / "export.json", ls_export(tasks, rate_by))
    via_ls = judges_ls.import_project(REFLVQA, release, [folder], [export], tmp_path / "ls")
    via_csv = REFLVQA.import_labels(
        release, [folder], csv_files(out, tmp_path / "csv-in", rate_by, ("rating",)), tmp_path / "csv"
    )
    assert via_ls.report == via_csv.report and via_ls.markdown == via_csv.markdown
    assert via_ls.report["groundedness"]["answers"] == 3
    assert (tmp_path / "ls" / "judge_agreement.json").read_text() == (
        tmp_path / "csv" / "judge_agreement.json"
    ).read_text()


def test_judge_project_refuses_what_the_csv_path_refuses(deflection, tmp_path):
    release, runs = deflection
    out = tmp_path / "review"
    judges_ls.export_project(DEFLECTION, release, runs, out, n=2)
    tasks = json.loads((out / TASKS).read_text())
    good = ls_export(tasks, grade_by)

    def importing(export: list[dict]):
        return lambda: judges_ls.import_project(
            DEFLECTION, release, runs, [save(tmp_path / "bad.json", export)], tmp_path / "out"
        )

    unknown = edited(good, 0, "data", "item_id", value="Z|s0|oracle|0|ranked|moderate")
    refused(importing(unknown), "task 1: item_id 'Z|s0|oracle|0|ranked|moderate' is not a decision of the given")
    twice = edited(good, 1, "annotations", value=good[1]["annotations"] + good[1]["annotations"][:1])
    refused(importing(twice), "task 2: item ")
    refused(importing(twice), "annotated twice by alice@example.org")
    off_scale = edited(good, 0, "annotations", 0, "result", 0, "value", "choices", value=["MAYBE"])
    refused(importing(off_scale), "label is ['MAYBE']; expected one of CORRECT, INCORRECT, NOT_ATTEMPTED")
    refused(
        lambda: judges_ls.import_project(
            DEFLECTION, release, runs, [save(tmp_path / "ok.json", good)], release / "inside"
        ),
        "immutable",
    )
    refused(lambda: judges_ls.export_project(DEFLECTION, release, runs, release / "review"), "immutable")
    # labelled work: a filled-in batch, or a Label Studio that ran on the folder
    rows = (out / "batch.jsonl").read_text().replace('"label": ""', '"label": "CORRECT"')
    (out / "batch.jsonl").write_text(rows)
    refused(lambda: judges_ls.export_project(DEFLECTION, release, runs, out), "labelled row")
    fresh = tmp_path / "fresh"
    judges_ls.export_project(DEFLECTION, release, runs, fresh, n=2)
    (fresh / SERVER_DATA).mkdir()
    (fresh / SERVER_DATA / "label_studio.sqlite3").write_text("annotations")
    before = (fresh / TASKS).read_text()
    refused(lambda: judges_ls.export_project(DEFLECTION, release, runs, fresh, n=3), "holds a Label Studio project")
    assert (fresh / TASKS).read_text() == before  # nothing written
    judges_ls.export_project(DEFLECTION, release, runs, fresh, n=3, force=True)
    assert not (fresh / SERVER_DATA).exists() and len(json.loads((fresh / TASKS).read_text())) == 6


def test_cli_judge_project_round_trip(deflection, tmp_path):
    from typer.testing import CliRunner

    release, runs = deflection
    out = tmp_path / "review"
    evals = [a for run in runs for a in ("--evaluation", str(run))]
    done = CliRunner().invoke(
        app, ["annotate", "export", str(release), *evals, "--out", str(out), "--format", "label-studio"]
    )
    assert done.exit_code == 0, done.output
    assert "judges.xml (labeling config)" in done.output
    export = save(tmp_path / "export.json", ls_export(json.loads((out / TASKS).read_text()), grade_by))
    done = CliRunner().invoke(
        app,
        [
            "annotate",
            "import",
            str(release),
            str(export),
            *evals,
            "--out",
            str(tmp_path / "agreement"),
            "--format",
            "label-studio",
        ],
    )
    assert done.exit_code == 0, done.output
    assert "12 items from 2 annotators (alice@example.org, bob@example.org)" in done.output
    assert "| Average | 9 |" in done.output  # 3 of the 12 split the two people


# ---------------------------------------------------------------------------- trajectories
def score_by(data: dict, email: str) -> dict[str, str]:
    """Ratings by the item's content (the person never sees its subset)."""
    base = len(data["trajectory"]) % 5
    return {"logic": str(base + 1), "visual": str((base + (email == "bob@example.org") * 2) % 5 + 1)}


def test_trajectory_project_is_blind_and_in_the_batch_order(built, tmp_path):  # noqa: F811
    out = tmp_path / "review"
    batch = trajectories_ls.export_project(built[1], out, n=4, seed=3)
    tasks = json.loads((out / TASKS).read_text())
    rows = [json.loads(line) for line in batch.jsonl.read_text().splitlines()]
    assert [t["data"]["item_id"] for t in tasks] == [r["item_id"] for r in rows]  # the CSV path's shuffle
    assert all(set(t["data"]) == {"item_id", "question", "ground_truth", "trajectory", "images"} for t in tasks)
    key = read_key(out)
    hidden = [v for k in key.values() for v in (k["sample_id"], *k["subsets"])]
    assert not any(f'"{v}"' in (out / TASKS).read_text() for v in hidden)  # no sample id, no subset
    images = [i for t in tasks for i in t["data"]["images"]]
    assert images and all((out / i["image"][len(LOCAL_FILES) :]).is_file() for i in images)
    assert [i["image"].rsplit("/", 1)[1] for i in tasks[0]["data"]["images"]] == rows[0]["images"]  # turn order
    config = ET.fromstring((out / "trajectories.xml").read_text())
    scales = {c.get("name"): [x.get("value") for x in c.iter("Choice")] for c in config.iter("Choices")}
    assert scales == {c: ["1", "2", "3", "4", "5"] for c in CRITERIA}
    assert all(c.get("required") == "true" for c in config.iter("Choices"))


def test_table6_from_label_studio_is_the_csv_paths(built, tmp_path):  # noqa: F811
    out = tmp_path / "review"
    trajectories_ls.export_project(built[1], out, n=5, seed=1)
    tasks = json.loads((out / TASKS).read_text())
    export = save(tmp_path / "export.json", ls_export(tasks, score_by))
    via_ls = trajectories_ls.import_project(out, [export], tmp_path / "ls")
    via_csv = import_trajectory_ratings(out, csv_files(out, tmp_path / "csv-in", score_by, CRITERIA), tmp_path / "csv")
    assert sorted(via_ls.annotators) == sorted(via_csv.annotators) == sorted(PEOPLE.values())
    assert via_ls.table == via_csv.table and via_ls.markdown == via_csv.markdown
    assert (
        pl.read_parquet(via_ls.ratings_path)
        .sort("item_id", "rater")
        .equals(pl.read_parquet(via_csv.ratings_path).sort("item_id", "rater"))
    )
    assert via_ls.table[0]["human_logic"] is not None


def test_trajectory_project_refuses_what_the_csv_path_refuses(built, tmp_path):  # noqa: F811
    out = tmp_path / "review"
    trajectories_ls.export_project(built[1], out, n=2, seed=0)
    good = ls_export(json.loads((out / TASKS).read_text()), score_by)

    def importing(export: list[dict], target: Path = tmp_path / "out"):
        return lambda: trajectories_ls.import_project(out, [save(tmp_path / "bad.json", export)], target)

    unknown = edited(good, 0, "data", "item_id", value="reflectv-quality-nope")
    refused(importing(unknown), "task 1: item_id 'reflectv-quality-nope' is not an item of this batch")
    twice = edited(good, 0, "annotations", value=good[0]["annotations"] + good[0]["annotations"][1:2])
    refused(importing(twice), "annotated twice by bob@example.org")
    off_scale = edited(good, 0, "annotations", 0, "result", 1, "value", "choices", value=["6"])
    refused(importing(off_scale), "visual is ['6']; expected one of 1, 2, 3, 4, 5")
    logic = good[0]["annotations"][0]["result"][0]
    half = edited(good, 0, "annotations", 0, "result", value=[logic])  # logic only: the CSV path's half-rated row
    refused(importing(half), "bad.json: task 1 (alice@example.org): visual is empty; expected an integer from 1 to 5")
    refused(importing(good, built[1] / "ratings"), "immutable")
    refused(lambda: trajectories_ls.export_project(built[1], built[1] / "review"), "immutable")
    (out / SERVER_DATA).mkdir()
    refused(lambda: trajectories_ls.export_project(built[1], out, n=2), "holds a Label Studio project")
    refused(lambda: trajectories_ls.import_project(out, [], tmp_path / "x"), "give at least one Label Studio JSON")


def test_cli_trajectory_project_round_trip(built, tmp_path):  # noqa: F811
    from typer.testing import CliRunner

    out = tmp_path / "review"
    done = CliRunner().invoke(
        app,
        ["annotate", "export-trajectories", str(built[1]), "--out", str(out), "--n", "2", "--format", "label-studio"],
    )
    assert done.exit_code == 0, done.output
    assert "trajectories.xml (labeling config)" in done.output
    export = save(tmp_path / "export.json", ls_export(json.loads((out / TASKS).read_text()), score_by))
    done = CliRunner().invoke(
        app,
        [
            "annotate",
            "import-trajectories",
            str(out),
            str(export),
            "--out",
            str(tmp_path / "rated"),
            "--format",
            "label-studio",
        ],
    )
    assert done.exit_code == 0, done.output
    assert "ratings from alice@example.org, bob@example.org" in done.output and "D_clean (released)" in done.output
    done = CliRunner().invoke(
        app, ["annotate", "export-trajectories", str(built[1]), "--out", str(out), "--format", "excel"]
    )
    assert isinstance(done.exception, MmcurateError) and "--format 'excel': one of csv, label-studio" in str(
        done.exception
    )


def test_two_exports_may_not_both_hold_one_annotator(built, tmp_path):  # noqa: F811
    out = tmp_path / "review"
    trajectories_ls.export_project(built[1], out, n=2, seed=0)
    export = ls_export(json.loads((out / TASKS).read_text()), score_by)
    first, second = save(tmp_path / "one.json", export), save(tmp_path / "two.json", export)
    refused(
        lambda: trajectories_ls.import_project(out, [first, second], tmp_path / "x"),
        "annotator 'alice@example.org' already given by another export",
    )


# ---------------------------------------------------------------------------- push
def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the block ends: nothing listens there


@pytest.fixture
def project(tmp_path) -> Path:
    out = tmp_path / "review"
    out.mkdir()
    (out / TASKS).write_text("[]")
    (out / "judges.xml").write_text("<View/>")
    return out


def test_push_fails_at_once_where_nothing_listens(project):
    url = f"http://127.0.0.1:{_closed_port()}"
    refused(lambda: push_project(project, url, "token", wait=600), f"nothing listens at {url}")
    refused(lambda: push_project(project, "http://no-such-host.invalid:8080", "token", wait=600), "nothing listens")
    refused(lambda: push_project(project, url, "token", wait=0), "--wait must be in (0, 86400] seconds, got 0")


def test_push_waits_for_a_server_that_is_up_but_not_ready(project):
    class Migrating(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(503)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Migrating)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        refused(lambda: push_project(project, url, "token", wait=0.1), "was not ready within 0.1 s (it answers 503)")
    finally:
        server.shutdown()


def test_push_waits_for_a_starting_server_only_while_it_runs(project, tmp_path):
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    url = f"http://127.0.0.1:{_closed_port()}"
    refused(
        lambda: push_project(project, url, "token", wait=600, server_pid=gone.pid),
        f"Label Studio (process {gone.pid}) exited before it listened",
    )
    starting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        refused(
            lambda: push_project(project, url, "token", wait=0.1, server_pid=starting.pid),
            "was not ready within 0.1 s (it is still starting",
        )
    finally:
        starting.kill()
        starting.wait()


def test_cli_push_names_the_missing_server_in_one_line(project, monkeypatch):
    from typer.testing import CliRunner

    monkeypatch.setenv("LABEL_STUDIO_API_KEY", "token")
    url = f"http://127.0.0.1:{_closed_port()}"
    done = CliRunner().invoke(app, ["annotate", "push-label-studio", str(project), "--url", url, "--wait", "5"])
    assert isinstance(done.exception, MmcurateError)  # `mmcurate` prints it as one line, exit 2
    assert str(done.exception).startswith(f"nothing listens at {url}") and "not ready" not in str(done.exception)
    done = CliRunner().invoke(app, ["annotate", "push-label-studio", str(project), "--url", url, "--wait", "-1"])
    assert isinstance(done.exception, MmcurateError) and "--wait must be in" in str(done.exception)
