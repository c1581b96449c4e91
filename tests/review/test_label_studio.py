"""RefLVQA citation review in Label Studio: the exported project (labeling config, tasks,
images served as Label Studio serves local files), and Label Studio's JSON export read back
into the same labels the CSV path reads: agreement, kappa and Table 3 come out identical."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from mmcurate.core.errors import MmcurateError
from mmcurate.releases.writer import write_release
from mmcurate.review.label_studio import LOCAL_FILES, TASKS
from mmcurate.review.reflvqa.citations import QUESTIONS, import_labels
from mmcurate.review.reflvqa.label_studio import CONFIG, export_project, import_project
from tests.releases import release_builders as b


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("reflvqa")
    store, shas = b.make_store(root / "images")
    return write_release(b.reflvqa_draft(b.reflvqa_tables(shas)), root / "releases", store)


def labels_for(tasks: list[dict], who: str) -> dict[str, dict]:
    """Deterministic labels per item for one annotator (they differ between annotators)."""
    out = {}
    for n, task in enumerate(tasks):
        flip = (n + len(who)) % 2 == 0
        out[task["data"]["item_id"]] = {
            "needs_verification": "yes",
            "documents_support": "yes" if flip else "no",
            "sentence_grounded": "yes" if flip or who == "bob@example.org" else "no",
            "document_support": ["yes" if (i + n) % 2 == 0 else "no" for i in range(len(task["data"]["documents"]))],
        }
    return out


def ls_export(tasks: list[dict], people: dict[int, str]) -> list[dict]:
    """Label Studio's JSON export of ``tasks`` annotated by ``people`` (user id -> e-mail)."""
    out = []
    for number, task in enumerate(tasks, start=1):
        annotations = []
        for user, email in people.items():
            labels = labels_for(tasks, email)[task["data"]["item_id"]]
            result = [
                {"from_name": q, "to_name": "sentence", "type": "choices", "value": {"choices": [labels[q]]}}
                for q in QUESTIONS
            ]
            result += [
                {
                    "from_name": f"document_support_{i}",
                    "to_name": f"document_{i}",
                    "type": "choices",
                    "value": {"choices": [v]},
                }
                for i, v in enumerate(labels["document_support"])
            ]
            annotations.append(
                {
                    "id": 100 * number + user,
                    "completed_by": {"id": user, "email": email},
                    "result": result,
                    "was_cancelled": False,
                }
            )
        out.append({"id": number, "data": task["data"], "annotations": annotations})
    return out


def test_the_project_shows_each_item_with_its_images_served_as_local_files(release, tmp_path):
    out = tmp_path / "review"
    batch = export_project(release, 10, out)
    tasks = json.loads((out / TASKS).read_text())
    assert len(tasks) == batch.items >= 1
    config = ET.fromstring((out / f"{CONFIG}.xml").read_text())
    assert {c.get("name") for c in config.iter("Choices")} >= set(QUESTIONS)
    cited = tasks[0]["data"]
    assert cited["image"].startswith(LOCAL_FILES + "images/")
    assert (out / cited["image"].removeprefix(LOCAL_FILES)).is_file()
    images = [d for d in cited["documents"] if d["image"]]
    assert images and all((out / d["image"].removeprefix(LOCAL_FILES)).is_file() for d in images)
    assert [d["cited"] for d in cited["documents"]][0] is True


def test_label_studio_labels_give_the_csv_paths_numbers(release, tmp_path):
    out = tmp_path / "review"
    export_project(release, 10, out)
    tasks = json.loads((out / TASKS).read_text())
    people = {1: "alice@example.org", 2: "bob@example.org"}
    (tmp_path / "export.json").write_text(json.dumps(ls_export(tasks, people)))
    via_ls = import_project(release, [tmp_path / "export.json"], tmp_path / "ls")
    batch = [json.loads(line) for line in (out / "batch.jsonl").read_text().splitlines()]
    files = []
    for email in people.values():
        labels = labels_for(tasks, email)
        rows = [{**row, **labels[row["item_id"]], "annotator": email} for row in batch]
        files.append(tmp_path / f"{email}.jsonl")
        files[-1].write_text("".join(json.dumps(r) + "\n" for r in rows))
    via_csv = import_labels(release, files, tmp_path / "csv")
    assert via_ls.agreement == via_csv.agreement and via_ls.table3 == via_csv.table3
    assert via_ls.entailment == via_csv.entailment and via_ls.annotators == sorted(people.values())
    ls_report, csv_report = (json.loads((tmp_path / d / "agreement.json").read_text()) for d in ("ls", "csv"))
    assert ls_report == csv_report
    assert (tmp_path / "ls" / "human_verified.parquet").read_bytes() == (
        tmp_path / "csv" / "human_verified.parquet"
    ).read_bytes()


def test_a_choice_written_as_a_string_is_that_choice_and_two_choices_say_so(release, tmp_path):
    """Issue 42 item 22: ``"choices": "yes"`` was refused as "is 'yes'; expected one of yes, no"."""
    out = tmp_path / "review"
    export_project(release, 10, out)
    tasks = json.loads((out / TASKS).read_text())
    listed = ls_export(tasks, {1: "alice@example.org", 2: "bob@example.org"})
    strings = json.loads(json.dumps(listed))
    for task in strings:
        for annotation in task["annotations"]:
            for result in annotation["result"]:
                result["value"]["choices"] = result["value"]["choices"][0]
    for name, export in (("listed", listed), ("strings", strings)):
        (tmp_path / f"{name}.json").write_text(json.dumps(export))
        import_project(release, [tmp_path / f"{name}.json"], tmp_path / name)
    assert (tmp_path / "listed" / "human_verified.parquet").read_bytes() == (
        tmp_path / "strings" / "human_verified.parquet"
    ).read_bytes()
    assert (tmp_path / "listed" / "agreement.json").read_text() == (tmp_path / "strings" / "agreement.json").read_text()
    both = json.loads(json.dumps(listed))
    both[0]["annotations"][0]["result"][0]["value"]["choices"] = ["yes", "no"]
    (tmp_path / "both.json").write_text(json.dumps(both))
    with pytest.raises(MmcurateError) as caught:
        import_project(release, [tmp_path / "both.json"], tmp_path / "both")
    assert f"{QUESTIONS[0]} has 2 choices (yes, no); expected one of yes, no, exactly one" in str(caught.value)


def test_bad_exports_are_one_line_errors(release, tmp_path):
    out = tmp_path / "review"
    export_project(release, 10, out)
    tasks = json.loads((out / TASKS).read_text())
    good = ls_export(tasks, {1: "alice@example.org"})

    def refused(export: list[dict] | str, needle: str) -> None:
        path = tmp_path / "bad.json"
        path.write_text(export if isinstance(export, str) else json.dumps(export))
        with pytest.raises(MmcurateError) as caught:
            import_project(release, [path], tmp_path / "out")
        assert needle in str(caught.value) and "\n" not in str(caught.value)

    unknown = json.loads(json.dumps(good))
    unknown[0]["data"]["item_id"] = "nope:0"
    refused(unknown, "item_id 'nope:0' is not a sentence")
    twice = json.loads(json.dumps(good))
    twice[0]["annotations"].append(twice[0]["annotations"][0])
    refused(twice, "annotated twice by alice@example.org")
    bad = json.loads(json.dumps(good))
    bad[0]["annotations"][0]["result"][0]["value"]["choices"] = ["maybe"]
    refused(bad, "expected one of yes, no")
    refused("{not json", "not a Label Studio JSON export")
    with pytest.raises(MmcurateError, match="inside"):
        export_project(release, 10, release / "review")
