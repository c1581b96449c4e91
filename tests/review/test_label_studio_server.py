"""Against a real Label Studio (``make review-setup`` installs it in its own environment; CI
installs it and points MMCURATE_LABEL_STUDIO at it): the exported project is created through
Label Studio's REST API, annotated by two people through the API, exported as Label Studio
exports, read back by mmcurate, and its numbers compared with the CSV path's for the same
labels; the labeling page renders the question's image and the choices in headless Chromium.
Skipped, with the reason, where Label Studio is not installed."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from mmcurate.releases.writer import write_release
from mmcurate.review.citations import QUESTIONS, import_labels
from mmcurate.review.label_studio import TASKS, push_project
from mmcurate.review.label_studio_citations import export_project, import_project

from tests.releases import release_builders as b
from tests.review.page_render import logged_in_page

REPO = Path(__file__).resolve().parents[2]
FOUND = [Path(p) for p in (os.environ.get("MMCURATE_LABEL_STUDIO", ""), REPO / ".venv-review" / "bin" / "label-studio")
         if p and Path(p).is_file()]
CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not FOUND, reason="Label Studio is not installed: `make review-setup` (or set MMCURATE_LABEL_STUDIO)")]


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A Label Studio on localhost (SQLite), serving the review folder's local files; the
    citation project of a RefLVQA release exported there and pushed through the API."""
    root = tmp_path_factory.mktemp("label-studio")
    store, shas = b.make_store(root / "images")
    release = write_release(b.reflvqa_draft(b.reflvqa_tables(shas)), root / "releases", store)
    review = root / "review"
    export_project(release, 10, review)
    token, port = secrets.token_hex(20), _free_port()
    env = {**os.environ, "LABEL_STUDIO_USERNAME": "alice@localhost", "LABEL_STUDIO_PASSWORD": "alice-review-1",
           "LABEL_STUDIO_USER_TOKEN": token, "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
           "LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED": "true", "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(review),
           "LABEL_STUDIO_BASE_DATA_DIR": str(root / "data"), "SENTRY_DSN": ""}
    process = subprocess.Popen([str(FOUND[0]), "start", "--no-browser", "--host", "127.0.0.1", "--port", str(port)],
                               env=env, stdout=(root / "ls.log").open("w"), stderr=subprocess.STDOUT,
                               start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        project = push_project(review, url, token, wait=1200)
        yield {"url": url, "token": token, "project": project, "release": release, "review": review, "root": root}
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)


def _client(server) -> httpx.Client:
    return httpx.Client(base_url=server["url"], headers={"Authorization": f"Token {server['token']}"}, timeout=60)


def _labels(item: int, who: int, documents: int) -> dict:
    return {"needs_verification": "yes", "documents_support": "yes" if (item + who) % 2 else "no",
            "sentence_grounded": "yes" if who == 1 or item % 2 else "no",
            "document_support": ["yes" if (d + who) % 2 else "no" for d in range(documents)]}


def test_labels_made_in_label_studio_give_the_csv_paths_numbers(server, tmp_path):
    with _client(server) as client:
        bob = client.post("/api/users/", json={"email": "bob@localhost", "username": "bob",
                                                "password": "bob-review-1"}).json()["id"]
        me = client.get("/api/current-user/whoami").json()["id"]
        tasks = client.get("/api/tasks", params={"project": server["project"]}).json()["tasks"]
        assert len(tasks) == len(json.loads((server["review"] / TASKS).read_text()))
        for n, task in enumerate(tasks):
            documents = len(task["data"]["documents"])
            for who, user in ((0, me), (1, bob)):
                labels = _labels(n, who, documents)
                result = [{"from_name": q, "to_name": "sentence", "type": "choices",
                           "value": {"choices": [labels[q]]}} for q in QUESTIONS]
                result += [{"from_name": f"document_support_{d}", "to_name": f"document_{d}", "type": "choices",
                            "value": {"choices": [v]}} for d, v in enumerate(labels["document_support"])]
                done = client.post(f"/api/tasks/{task['id']}/annotations/", json={"result": result, "completed_by": user})
                assert done.status_code == 201, done.text
        exported = client.get(f"/api/projects/{server['project']}/export", params={"exportType": "JSON"})
        assert exported.status_code == 200
    (tmp_path / "export.json").write_bytes(exported.content)
    via_ls = import_project(server["release"], [tmp_path / "export.json"], tmp_path / "ls")
    files = []
    for who, user in ((0, me), (1, bob)):
        rows = []
        for n, task in enumerate(tasks):
            docs = task["data"]["documents"]
            rows.append({"item_id": task["data"]["item_id"], **_labels(n, who, len(docs)),
                         "document_ids": [d["doc_id"] for d in docs if d["cited"]],
                         "rejected_ids": [d["doc_id"] for d in docs if not d["cited"]],
                         "annotator": f"annotator-{user}"})
        files.append(tmp_path / f"{who}.jsonl")
        files[-1].write_text("".join(json.dumps(r) + "\n" for r in rows))
    via_csv = import_labels(server["release"], files, tmp_path / "csv")
    assert via_ls.annotators == via_csv.annotators and len(via_ls.annotators) == 2
    assert via_ls.agreement == via_csv.agreement and via_ls.table3 == via_csv.table3
    assert via_ls.entailment == via_csv.entailment
    assert json.loads((tmp_path / "ls" / "agreement.json").read_text()) == \
        json.loads((tmp_path / "csv" / "agreement.json").read_text())


def test_the_labeling_page_shows_the_image_and_the_choices(server, tmp_path):
    """Logged in (Django's session cookie, set in Chromium through the DevTools protocol), the
    task's labeling page shows the question's image (served from the local files) and the
    yes/no choices of the three questions."""
    if not CHROMIUM.exists():
        pytest.skip("headless render needs Debian's chromium at /usr/bin/chromium")

    with _client(server) as client:
        task = client.get("/api/tasks", params={"project": server["project"]}).json()["tasks"][0]
    page = logged_in_page(CHROMIUM, server["url"], "alice@localhost", "alice-review-1",
                          f"/projects/{server['project']}/data?task={task['id']}", tmp_path)
    assert page["images_loaded"] >= 1, page
    assert page["text"].count("yes") >= 3 and page["text"].count("no") >= 3, page["text"][:2000]
    assert "Does the sentence need fact verification?" in page["text"]
    shutil.copy(page["screenshot"], tmp_path / "labeling.png")
