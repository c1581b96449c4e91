"""Against a real Label Studio (``make review-setup`` installs it in its own environment; CI
installs it and points MMCURATE_LABEL_STUDIO at it), for each review (RefLVQA citations, the
DeflectionBench judge's Table 7, RefLVQA's evaluator checks, ReflectV's Table 6): the exported project is created through
Label Studio's REST API, annotated by two people through the API, exported as Label Studio
exports, read back by mmcurate, and its numbers compared with the CSV path's for the same
labels; each labeling page renders its image and its choices in headless Chromium.

Label Studio serves local files below one document root, the review folder, so one server
runs per review folder in turn, all on one database (migrated once, on the first start).
Skipped, with the reason, where Label Studio is not installed."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from mmcurate.releases.writer import write_release
from mmcurate.review import label_studio_judges as judges_ls
from mmcurate.review.deflectionbench.judges import REVIEW as DEFLECTION
from mmcurate.review.label_studio import TASKS, project_config, pull_export, push_project, server_command, server_env
from mmcurate.review.reflectv import label_studio as trajectories_ls
from mmcurate.review.reflectv.trajectories import CRITERIA, import_trajectory_ratings
from mmcurate.review.reflvqa import label_studio as citations_ls
from mmcurate.review.reflvqa.citations import QUESTIONS, import_labels
from mmcurate.review.reflvqa.judges import REVIEW as REFLVQA
from tests.releases import release_builders as b
from tests.review.page_render import logged_in_page
from tests.review.test_judge_batches import reflvqa_evaluation
from tests.review.test_label_studio_reviews import PEOPLE, deflection_release, grade_by, rate_by, score_by
from tests.review.test_trajectory_batches import built  # noqa: F401  (the ReflectV release fixture)

REPO = Path(__file__).resolve().parents[2]
FOUND = [
    Path(p)
    for p in (os.environ.get("MMCURATE_LABEL_STUDIO", ""), REPO / ".venv-review" / "bin" / "label-studio")
    if p and Path(p).is_file()
]
CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not FOUND, reason="Label Studio is not installed: `make review-setup` (or set MMCURATE_LABEL_STUDIO)"
    ),
]
ALICE, PASSWORD = "alice@localhost", "alice-review-1"


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LabelStudio:
    """One Label Studio at a time on localhost (SQLite), serving one review folder's local files."""

    def __init__(self, root: Path) -> None:
        self.root, self.token = root, secrets.token_hex(20)
        self.process: subprocess.Popen | None = None
        self.review: Path | None = None
        self.url, self.project = "", 0

    def serve(self, review: Path) -> LabelStudio:
        """Label Studio serving ``review`` with its project pushed (restarted for another folder)."""
        if review == self.review:
            return self
        self.stop()
        port = _free_port()
        env = {**server_env(review, self.token, PASSWORD, self.root / "data"), "LABEL_STUDIO_USERNAME": ALICE}
        log = (self.root / f"ls-{review.name}.log").open("w")
        self.process = subprocess.Popen(
            server_command(FOUND[0], port),
            env=env,
            stdout=log,  # what review-ui runs
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.url, self.review = f"http://127.0.0.1:{port}", review
        self.project = push_project(review, self.url, self.token, wait=1800, server_pid=self.process.pid)
        return self

    def stop(self) -> None:
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=60)
            self.process, self.review = None, None

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Token {self.token}"}, timeout=60)


@pytest.fixture(scope="module")
def label_studio(tmp_path_factory):
    server = LabelStudio(tmp_path_factory.mktemp("label-studio"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def reviews(tmp_path_factory, built) -> dict[str, dict[str, Any]]:  # noqa: F811
    """Each review exported as a Label Studio project: kind -> its folder and how to read it back."""
    root = tmp_path_factory.mktemp("reviews")
    store, shas = b.make_store(root / "images")
    reflvqa = write_release(b.reflvqa_draft(b.reflvqa_tables(shas)), root / "releases", store)
    citations_ls.export_project(reflvqa, 10, root / "citations")
    deflection, runs = deflection_release(root / "deflection")
    judges_ls.export_project(DEFLECTION, deflection, runs, root / "judges")
    evaluated, evaluation = reflvqa_evaluation(root / "reflvqa")
    judges_ls.export_project(REFLVQA, evaluated, [evaluation], root / "reflvqa-judges")
    trajectories_ls.export_project(built[1], root / "trajectories", n=3, seed=1)
    return {  # "choices": shown on the page; "radios": at least so many single-choice buttons
        "citations": {
            "review": root / "citations",
            "release": reflvqa,
            "ready": "Does the sentence need fact verification?",
            "choices": ["yes", "no"],
            "radios": 6,
        },
        "judges": {
            "review": root / "judges",
            "release": deflection,
            "runs": runs,
            "ready": "Grade the model's answer",
            "choices": ["CORRECT", "INCORRECT", "NOT_ATTEMPTED"],
            "radios": 3,
        },
        "reflvqa-judges": {
            "review": root / "reflvqa-judges",
            "release": evaluated,
            "runs": [evaluation],
            "ready": "Rate the statement",
            "choices": ["Statement to rate"],
            "radios": 3,
        },
        "trajectories": {
            "review": root / "trajectories",
            "ready": "Logical coherence",
            "choices": ["Visual validity", "5"],
            "radios": 10,
        },
    }


def test_label_studio_listens_on_loopback_only(label_studio, reviews):
    """Every listening socket of the Label Studio process tree (started as `make review-ui`
    starts it) is on 127.0.0.1: nothing answers on the host's other addresses."""
    import psutil

    server = label_studio.serve(reviews["citations"]["review"])
    root = psutil.Process(server.process.pid)
    pids = {p.pid for p in (root, *root.children(recursive=True))}
    listening = [c for c in psutil.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN and c.pid in pids]
    assert listening and all(c.laddr.ip == "127.0.0.1" for c in listening), listening


def _citation_labels(data: dict, email: str) -> dict[str, str]:
    n, who = len(data["sentence"]), email == PEOPLE[2]
    labels = {
        "needs_verification": "yes",
        "documents_support": "yes" if (n + who) % 2 else "no",
        "sentence_grounded": "yes" if who or n % 2 else "no",
    }
    labels.update({f"document_support_{d}": "yes" if (d + who) % 2 else "no" for d in range(len(data["documents"]))})
    return labels


def _to_name(config: ET.Element, name: str) -> str:
    """The object a choice control of the labeling config labels (inside a Repeater, by index)."""
    for control in config.iter("Choices"):
        found = re.fullmatch(re.escape(control.get("name")).replace(re.escape("{{idx}}"), r"(\d+)"), name)
        if found:
            return control.get("toName").replace("{{idx}}", found.group(1) if found.groups() else "")
    raise AssertionError(f"no control {name} in the labeling config")


def _annotate(server: LabelStudio, choose: Callable[[dict, str], dict[str, str]]) -> tuple[Path, dict[str, str], list]:
    """Alice and Bob annotate every task through the API (``choose(task data, e-mail)``); the
    project's JSON export as `annotate pull-label-studio` saves it, annotator name (their e-mail)
    -> the e-mail their labels were chosen by, the tasks."""
    with server.client() as client:
        users = {u["email"]: u["id"] for u in client.get("/api/users/").json()}
        if PEOPLE[2] not in users:
            users[PEOPLE[2]] = client.post(
                "/api/users/", json={"email": PEOPLE[2], "username": "bob", "password": "bob-review-1"}
            ).json()["id"]
        me = client.get("/api/current-user/whoami").json()["id"]
        tasks = client.get("/api/tasks", params={"project": server.project, "page_size": 1000}).json()["tasks"]
        assert len(tasks) == len(json.loads((server.review / TASKS).read_text()))
        config = ET.fromstring(project_config(server.review).read_text())
        for task in tasks:
            for user, email in ((me, PEOPLE[1]), (users[PEOPLE[2]], PEOPLE[2])):
                result = [
                    {
                        "from_name": name,
                        "to_name": _to_name(config, name),
                        "type": "choices",
                        "value": {"choices": [value]},
                    }
                    for name, value in choose(task["data"], email).items()
                ]
                done = client.post(
                    f"/api/tasks/{task['id']}/annotations/", json={"result": result, "completed_by": user}
                )
                assert done.status_code == 201, done.text
    path = server.root / f"export-{server.review.name}.json"
    project, emails = pull_export(server.review, server.url, server.token, path)
    names = {ALICE: PEOPLE[1], PEOPLE[2]: PEOPLE[2]}  # the annotators by e-mail (not annotator-<id>) -> labels
    assert project == server.project and emails == sorted(names)
    return path, names, tasks


def _csv_files(folder: Path, tasks: list, names: dict[str, str], row: Callable[[dict, str], dict]) -> list[Path]:
    folder.mkdir()
    files = []
    for name, email in names.items():
        files.append(folder / f"{email}.jsonl")
        files[-1].write_text("".join(json.dumps({**row(t["data"], email), "annotator": name}) + "\n" for t in tasks))
    return files


def test_citations_made_in_label_studio_give_the_csv_paths_numbers(label_studio, reviews, tmp_path):
    server = label_studio.serve(reviews["citations"]["review"])
    export, names, tasks = _annotate(server, _citation_labels)
    release = reviews["citations"]["release"]
    via_ls = citations_ls.import_project(release, [export], tmp_path / "ls")

    def row(data: dict, email: str) -> dict:
        labels = _citation_labels(data, email)
        docs = data["documents"]
        return {
            "item_id": data["item_id"],
            **{q: labels[q] for q in QUESTIONS},
            "document_support": [labels[f"document_support_{d}"] for d in range(len(docs))],
            "document_ids": [d["doc_id"] for d in docs if d["cited"]],
            "rejected_ids": [d["doc_id"] for d in docs if not d["cited"]],
        }

    via_csv = import_labels(release, _csv_files(tmp_path / "csv-in", tasks, names, row), tmp_path / "csv")
    assert via_ls.annotators == via_csv.annotators and len(via_ls.annotators) == 2
    assert via_ls.agreement == via_csv.agreement and via_ls.table3 == via_csv.table3
    assert via_ls.entailment == via_csv.entailment
    assert json.loads((tmp_path / "ls" / "agreement.json").read_text()) == json.loads(
        (tmp_path / "csv" / "agreement.json").read_text()
    )


@pytest.mark.parametrize(
    ("kind", "review", "choose", "figure"),
    [
        ("judges", DEFLECTION, grade_by, ("average", "items", 9)),  # Table 7: 3 of the 12 split the two people
        ("reflvqa-judges", REFLVQA, rate_by, ("relevance", "answers", 3)),
    ],
)
def test_judge_labels_made_in_label_studio_give_the_csv_paths_numbers(
    label_studio, reviews, tmp_path, kind, review, choose, figure
):
    """DeflectionBench's judge labels (Table 7) and RefLVQA's evaluator ratings (two scales, 1 / 0.5 / 0
    and relevance 1-7, loaded per task as dynamic choices)."""
    server = label_studio.serve(reviews[kind]["review"])
    export, names, tasks = _annotate(server, choose)
    release, runs = reviews[kind]["release"], reviews[kind]["runs"]
    via_ls = judges_ls.import_project(review, release, runs, [export], tmp_path / "ls")
    files = _csv_files(
        tmp_path / "csv-in", tasks, names, lambda data, email: {"item_id": data["item_id"], **choose(data, email)}
    )
    via_csv = review.import_labels(release, runs, files, tmp_path / "csv")
    assert len(via_ls.annotators) == 2 and via_ls.report == via_csv.report and via_ls.markdown == via_csv.markdown
    section, key, value = figure
    assert via_ls.report[section][key] == value


def test_trajectory_ratings_made_in_label_studio_give_the_csv_paths_table6(label_studio, reviews, tmp_path):
    server = label_studio.serve(reviews["trajectories"]["review"])
    export, names, tasks = _annotate(server, score_by)
    batch = reviews["trajectories"]["review"]
    via_ls = trajectories_ls.import_project(batch, [export], tmp_path / "ls")
    files = _csv_files(
        tmp_path / "csv-in", tasks, names, lambda data, email: {"item_id": data["item_id"], **score_by(data, email)}
    )
    via_csv = import_trajectory_ratings(batch, files, tmp_path / "csv")
    assert len(via_ls.annotators) == 2 and via_ls.table == via_csv.table and via_ls.markdown == via_csv.markdown
    assert all(row[f"human_{c}"] is not None for row in via_ls.table for c in CRITERIA if row["items"])


@pytest.mark.parametrize("kind", ["citations", "judges", "reflvqa-judges", "trajectories"])
def test_the_labeling_page_shows_the_image_and_the_choices(label_studio, reviews, kind, tmp_path):
    """Logged in (Django's session cookie, set in Chromium through the DevTools protocol), a
    task's labeling page shows its image (served from the local files) and its choices (the
    judge's come from the task: Label Studio's dynamic choices)."""
    if not CHROMIUM.exists():
        pytest.skip("headless render needs Debian's chromium at /usr/bin/chromium")
    review = reviews[kind]
    server = label_studio.serve(review["review"])
    with server.client() as client:
        task = client.get("/api/tasks", params={"project": server.project}).json()["tasks"][0]
    page = logged_in_page(
        CHROMIUM,
        server.url,
        ALICE,
        PASSWORD,
        f"/projects/{server.project}/data?task={task['id']}",
        tmp_path,
        ready=review["ready"],
    )
    assert page["images_loaded"] >= 1, page
    assert review["ready"] in page["text"], page["text"][:2000]
    assert all(choice in page["text"] for choice in review["choices"]), page["text"][:2000]
    assert page["radios"] >= review["radios"], page
    shutil.copy(page["screenshot"], tmp_path / f"labeling-{kind}.png")
