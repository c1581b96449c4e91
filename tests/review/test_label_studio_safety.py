"""Label Studio review, what must not go wrong (issue 42): the server listens on loopback only
with a random password kept 0600 (item 2), no export into the source tree (3), no image read
from outside the batch folder (7), no import silently replacing an earlier one (10), no
temporary folder left by a killed import (11), one line for a malformed export (16), the
annotators named by e-mail and a labeling page that fits one screen (23)."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
import textwrap
import threading
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

import mmcurate.review
from mmcurate.cli.app import app
from mmcurate.core.errors import MmcurateError
from mmcurate.review import label_studio as ls
from mmcurate.review import label_studio_judges as judges_ls
from mmcurate.review.deflectionbench.judges import REVIEW as DEFLECTION
from mmcurate.review.label_studio import SERVER_DATA, TASKS
from mmcurate.review.reflectv import label_studio as trajectories_ls
from mmcurate.review.reflectv.trajectories import import_trajectory_ratings
from mmcurate.review.reflvqa import label_studio as citations_ls
from mmcurate.review.reflvqa.citations import import_labels
from mmcurate.review.reflvqa.judges import REVIEW as REFLVQA
from tests.review.test_label_studio import ls_export, release  # noqa: F401  (the RefLVQA release fixture)
from tests.review.test_label_studio_reviews import deflection_release

REPO = Path(__file__).resolve().parents[2]
NEVER_A_PID = 4_194_305  # above the largest pid_max Linux allows (2**22): no process has it


def one_line(call, *args) -> str:
    """The one-line MmcurateError ``call(*args)`` raises."""
    with pytest.raises(MmcurateError) as caught:
        call(*args)
    message = str(caught.value)
    assert "\n" not in message, message
    return message


@pytest.fixture
def project(release, tmp_path) -> tuple[Path, list[dict]]:  # noqa: F811
    out = tmp_path / "review"
    citations_ls.export_project(release, 10, out)
    return out, json.loads((out / TASKS).read_text())


def save(path: Path, export: object) -> Path:
    path.write_text(export if isinstance(export, str) else json.dumps(export))
    return path


# ---------------------------------------------------------------------------- item 16
def test_a_malformed_export_is_one_line_naming_the_task_and_the_field(release, project, tmp_path):  # noqa: F811
    good = ls_export(project[1], {1: "alice@example.org"})

    def broken(change) -> list[dict]:
        export = json.loads(json.dumps(good))
        change(export[0])
        return export

    cases = {
        "data is a list": broken(lambda t: t.update(data=[1, 2])),
        "annotations is an object": broken(lambda t: t.update(annotations={"result": []})),
        "annotations is a string": broken(lambda t: t.update(annotations="done")),
        "annotations is null": broken(lambda t: t.update(annotations=None)),
        "annotations[0] is null": broken(lambda t: t.update(annotations=[None])),
        "annotations[0].result is a string": broken(lambda t: t["annotations"][0].update(result="yes")),
        "annotations[0].result[0] is a number": broken(lambda t: t["annotations"][0].update(result=[3])),
        "needs_verification's value is a list": broken(
            lambda t: t["annotations"][0]["result"][0].update(value=["yes"])
        ),
        # (value.choices written as a lone string is read as that choice: test_label_studio.py)
        "needs_verification's value.choices is a number": broken(
            lambda t: t["annotations"][0]["result"][0].update(value={"choices": 3})
        ),
        "data.documents is a string": broken(lambda t: t["data"].update(documents="doc-1")),
        "data.documents[0] is a string": broken(lambda t: t["data"].update(documents=["doc-1"])),
        "completed_by is a list": broken(lambda t: t["annotations"][0].update(completed_by=[1])),
    }
    for needle, export in cases.items():
        bad = save(tmp_path / "bad.json", export)
        message = one_line(citations_ls.import_project, release, [bad], tmp_path / "out")
        assert "bad.json: task 1" in message and needle in message, (needle, message)
    deep = one_line(
        lambda: citations_ls.import_project(release, [save(tmp_path / "deep.json", "[" * 100_000)], tmp_path / "out")
    )
    assert "deep.json: not a Label Studio JSON export (nested too deeply" in deep
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------- item 10
def test_an_import_over_an_earlier_one_is_refused_unless_forced(release, project, tmp_path):  # noqa: F811
    both = save(tmp_path / "both.json", ls_export(project[1], {1: "alice@example.org", 2: "bob@example.org"}))
    alone = save(tmp_path / "alone.json", ls_export(project[1], {1: "alice@example.org"}))
    out = tmp_path / "agreement"
    assert citations_ls.import_project(release, [both], out).annotators == ["alice@example.org", "bob@example.org"]
    before = {name: (out / name).read_bytes() for name in ("agreement.json", "human_verified.parquet")}
    message = one_line(lambda: citations_ls.import_project(release, [alone], out))
    assert f"{out} holds an earlier import (human_verified.parquet, agreement.json)" in message
    assert "imports are not merged" in message and "--force" in message
    assert {name: (out / name).read_bytes() for name in before} == before  # untouched
    csv = tmp_path / "alice.jsonl"
    csv.write_text("")
    one_line(lambda: import_labels(release, [csv], out))  # the CSV path refuses the same way
    done = CliRunner().invoke(
        app, ["annotate", "import", str(release), str(alone), "--out", str(out), "--format", "label-studio"]
    )
    assert isinstance(done.exception, MmcurateError) and "holds an earlier import" in str(done.exception)
    done = CliRunner().invoke(
        app, ["annotate", "import", str(release), str(alone), "--out", str(out), "--format", "label-studio", "--force"]
    )
    assert done.exit_code == 0, done.output
    assert json.loads((out / "agreement.json").read_text())["annotators"] == ["alice@example.org"]


def test_judge_and_trajectory_imports_refuse_an_earlier_import_too(tmp_path):
    judged, runs = deflection_release(tmp_path / "deflection")
    judges_ls.export_project(DEFLECTION, judged, runs, tmp_path / "judges")
    out = tmp_path / "agreement"
    out.mkdir()
    (out / "judge_agreement.json").write_text("{}")
    message = one_line(lambda: DEFLECTION.import_labels(judged, runs, [tmp_path / "x.jsonl"], out))
    assert "holds an earlier import (judge_agreement.json)" in message
    rated = tmp_path / "rated"
    rated.mkdir()
    (rated / "table6.json").write_text("{}")
    message = one_line(lambda: import_trajectory_ratings(tmp_path / "batch", [tmp_path / "r.jsonl"], rated))
    assert "holds an earlier import (table6.json)" in message


# ---------------------------------------------------------------------------- item 3
def test_an_export_inside_the_source_tree_is_refused(release, tmp_path):  # noqa: F811
    source = Path(mmcurate.review.__file__).resolve().parent  # the checkout's review/ folder
    inside = source / "review-batch"
    try:
        message = one_line(lambda: citations_ls.export_project(release, 10, inside))
    finally:
        written = inside.exists()
        shutil.rmtree(inside, ignore_errors=True)  # the checkout stays as it was, whatever happened
    assert f"--out {inside} lies inside the Python package {source}" in message and "review-work/" in message
    assert not written
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    one_line(lambda: citations_ls.export_project(release, 10, package / "deeper" / "out"))
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text("")
    assert "root of a source checkout" in one_line(lambda: citations_ls.export_project(release, 10, checkout))
    try:
        done = CliRunner().invoke(app, ["annotate", "export", str(release), "--out", str(inside), "--format", "csv"])
    finally:
        shutil.rmtree(inside, ignore_errors=True)
    assert isinstance(done.exception, MmcurateError) and "lies inside the Python package" in str(done.exception)
    citations_ls.export_project(release, 10, checkout / "review-work")  # a folder of its own is fine


def test_the_docs_review_in_a_folder_that_is_no_package():
    page = (REPO / "docs" / "commands" / "annotate.md").read_text()  # the README's section moved there (issue 44)
    section = page[page.index("## Reviewing in Label Studio") :]
    section = section.split("\n## ", 1)[0]
    assert "--out review/" not in section and "REVIEW=review/" not in section
    assert "--out review-work/" in section and "make review-ui REVIEW=review-work/" in section
    ignored = (REPO / ".gitignore").read_text().splitlines()
    assert ".label-studio/" in ignored and "/review-work/" in ignored


# ---------------------------------------------------------------------------- item 7
class Recorder:
    """A model rater that only records what it was asked to rate."""

    model = "recorder"

    def __init__(self) -> None:
        self.asked: list = []

    def rate(self, batch, key):
        self.asked.append(key)
        return {}, ["not rated"]


@pytest.mark.parametrize("image", ["../../s.png", "/abs/s.png", "sub/s.png", "..", "link.png"])
def test_key_images_outside_the_batch_folder_are_never_read(tmp_path, image):
    batch = tmp_path / "batch"
    (batch / "images").mkdir(parents=True)
    (tmp_path / "s.png").write_bytes(b"secret")
    (batch / "images" / "link.png").symlink_to(tmp_path / "s.png")
    item = "reflectv-quality-1"
    (batch / "key.jsonl").write_text(
        json.dumps(
            {
                "item_id": item,
                "subsets": ["raw"],
                "sample_id": "s1",
                "images": [image],
                "question": "q",
                "ground_truth": "g",
                "trajectory": "t",
            }
        )
        + "\n"
    )
    (batch / TASKS).write_text("[]")
    (batch / "trajectories.xml").write_text("<View/>")
    export = save(
        tmp_path / "export.json",
        [
            {
                "id": 1,
                "data": {"item_id": item},
                "annotations": [
                    {
                        "completed_by": {"id": 1, "email": "alice@example.org"},
                        "result": [
                            {"from_name": c, "to_name": "trajectory", "type": "choices", "value": {"choices": ["3"]}}
                            for c in ("logic", "visual")
                        ],
                    }
                ],
            }
        ],
    )
    rater = Recorder()
    message = one_line(lambda: trajectories_ls.import_project(batch, [export], tmp_path / "rated", rater))
    assert "key.jsonl:1: images must name files of" in message and "nothing outside the batch folder" in message
    assert rater.asked == [] and not (tmp_path / "rated").exists()


# ---------------------------------------------------------------------------- item 11
def test_a_killed_imports_temporary_folder_goes_on_the_next_run(release, project, tmp_path, monkeypatch):  # noqa: F811
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(temporary))
    stale = temporary / f"{ls.TEMPORARY}{NEVER_A_PID}-abc123"
    stale.mkdir()
    (stale / "annotator-0.jsonl").write_text("{}\n")
    running = temporary / f"{ls.TEMPORARY}{os.getpid()}-def456"  # an import still running (this process)
    running.mkdir()
    other = temporary / f"{ls.TEMPORARY}xyz"  # not named by a process: not ours to judge
    other.mkdir()
    export = save(tmp_path / "export.json", ls_export(project[1], {1: "alice@example.org"}))
    done = CliRunner().invoke(
        app,
        [
            "annotate",
            "import",
            str(release),
            str(export),
            "--out",
            str(tmp_path / "agreement"),
            "--format",
            "label-studio",
        ],
    )
    assert done.exit_code == 0, done.output
    assert f"removed {stale}, the temporary folder of a Label Studio import that was killed" in done.stderr
    assert not stale.exists() and running.is_dir() and other.is_dir()
    assert sorted(temporary.iterdir()) == sorted([running, other])  # the import's own folder is gone too


def test_an_imports_temporary_folder_is_named_by_its_process(release, project, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    seen = []
    with ls.labelled_files(
        [save(tmp_path / "e.json", ls_export(project[1], {1: "a@b.c"}))],
        {t["data"]["item_id"] for t in project[1]},
        "x",
        lambda a: {"item_id": a.item},
    ) as files:
        seen = [f.parent for f in files]
        assert ls.remove_stale_temporaries() == [] and all(f.is_file() for f in files)  # alive: kept
    assert seen and re.fullmatch(rf"{ls.TEMPORARY}{os.getpid()}-.+", seen[0].name) and not seen[0].exists()


# ---------------------------------------------------------------------------- item 23
def test_every_labeling_page_caps_its_images(tmp_path):
    configs = [
        citations_ls.labeling_config(),
        trajectories_ls.labeling_config(),
        judges_ls.labeling_config(DEFLECTION),
        judges_ls.labeling_config(REFLVQA),
    ]
    for config in configs:
        images = list(ET.fromstring(config).iter("Image"))
        assert images and all(int(i.get("maxWidth").removesuffix("px")) <= 320 for i in images), config


def test_the_import_names_annotators_by_email_from_created_username(release, project, tmp_path):  # noqa: F811
    export = ls_export(project[1], {1: "alice@example.org"})
    for task in export:
        for annotation in task["annotations"]:
            annotation.update(completed_by=1, created_username="Alice Smith alice@example.org, 1")  # Label Studio's
    result = citations_ls.import_project(release, [save(tmp_path / "e.json", export)], tmp_path / "out")
    assert result.annotators == ["alice@example.org"]


class FakeLabelStudio(BaseHTTPRequestHandler):
    """Label Studio's API as far as the pull reads it: its export names annotators by user id."""

    export: list = []

    def do_GET(self):  # noqa: N802
        routes = {
            "/api/projects": {"results": [{"id": 7, "title": self.server.title}]},
            "/api/projects/7/export": self.export,
            "/api/users/": [{"id": 1, "email": "alice@example.org"}, {"id": 2, "email": "bob@example.org"}],
        }
        body = routes.get(self.path.split("?")[0])
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(body).encode())

    def log_message(self, *args):
        pass


def test_pulled_exports_name_annotators_by_email(release, project, tmp_path, monkeypatch):  # noqa: F811
    out, tasks = project
    export = ls_export(tasks, {1: "alice@example.org", 2: "bob@example.org"})
    for task in export:
        for annotation in task["annotations"]:
            annotation["completed_by"] = annotation["completed_by"]["id"]  # what Label Studio's export holds
    assert citations_ls.import_project(
        release, [save(tmp_path / "ids.json", export)], tmp_path / "by-id"
    ).annotators == ["annotator-1", "annotator-2"]
    FakeLabelStudio.export = export
    server = HTTPServer(("127.0.0.1", 0), FakeLabelStudio)
    server.title = ls.TITLE.format(review="citations", folder=out.name)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("LABEL_STUDIO_API_KEY", "token")
        pulled = tmp_path / "pulled.json"
        done = CliRunner().invoke(
            app,
            [
                "annotate",
                "pull-label-studio",
                str(out),
                "--out",
                str(pulled),
                "--url",
                f"http://127.0.0.1:{server.server_address[1]}",
            ],
        )
    finally:
        server.shutdown()
    assert done.exit_code == 0, done.output
    assert f"project 7: annotations of alice@example.org, bob@example.org -> {pulled}" in done.output
    result = citations_ls.import_project(release, [pulled], tmp_path / "by-email")
    assert result.annotators == ["alice@example.org", "bob@example.org"]


# ---------------------------------------------------------------------------- item 2
FAKE = textwrap.dedent('''\
    """A stand-in for `label-studio start`: records its command line and environment, then
    answers the project push on the address and port it is told, and exits after the import."""
    import json, sys
    from http.server import BaseHTTPRequestHandler, HTTPServer
    import os

    args = sys.argv[1:]
    with open(os.environ["FAKE_RECORD"], "a") as record:
        record.write(json.dumps({"argv": args, "password": os.environ.get("LABEL_STUDIO_PASSWORD"),
                                 "token": os.environ.get("LABEL_STUDIO_USER_TOKEN")}) + "\\n")

    class Api(BaseHTTPRequestHandler):
        def reply(self, body):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(json.dumps(body).encode())
            if self.path.endswith("/import"):
                self.server.done = True

        def do_GET(self):
            self.reply({"results": []})

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.reply({"id": 3})

        def log_message(self, *a):
            pass

    server = HTTPServer((args[args.index("--internal-host") + 1], int(args[args.index("--port") + 1])), Api)
    server.done = False
    while not server.done:
        server.handle_request()
    ''')


def test_label_studio_is_started_on_loopback_only():
    command = ls.server_command("/venv/bin/label-studio", 8080)
    assert command[command.index("--internal-host") + 1] == "127.0.0.1"  # its bind address (default 0.0.0.0)
    assert "--host" not in command and "0.0.0.0" not in command  # --host is only the URL it writes in links
    recipe = (REPO / "Makefile").read_text().split("\nreview-ui:", 1)[1].split("\n\n", 1)[0]
    assert "annotate serve-label-studio" in recipe and "--host" not in recipe and "label-studio start" not in recipe
    assert "mmcurate-review" not in (REPO / "Makefile").read_text()  # no published password


def test_the_launcher_makes_a_random_password_shown_once_and_keeps_secrets_0600(project, tmp_path, monkeypatch):
    out = project[0]
    fake = tmp_path / "label-studio"
    fake.write_text(f"#!{sys.executable}\n{FAKE}")
    fake.chmod(0o755)
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv("FAKE_RECORD", str(record))
    monkeypatch.delenv("LABEL_STUDIO_PASSWORD", raising=False)
    (out / SERVER_DATA).mkdir()
    (out / SERVER_DATA / "token").write_text("token-of-an-older-review-ui\n")  # as the Makefile kept it: 0644
    (out / SERVER_DATA / "token").chmod(0o644)
    runs = []
    for _ in range(2):
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        done = CliRunner().invoke(
            app,
            [
                "annotate",
                "serve-label-studio",
                str(out),
                "--label-studio",
                str(fake),
                "--port",
                str(port),
                "--wait",
                "60",
            ],
        )
        assert done.exit_code == 0, done.output
        runs.append(done.output)
    started = [json.loads(line) for line in record.read_text().splitlines()]
    data = out / SERVER_DATA
    password, token = (data / "password").read_text().strip(), (data / "token").read_text().strip()
    assert started[0]["password"] == started[1]["password"] == password and len(password) >= 20
    assert started[0]["token"] == token == "token-of-an-older-review-ui" and password != "mmcurate-review"
    assert started[0]["argv"][started[0]["argv"].index("--internal-host") + 1] == "127.0.0.1"
    assert password in runs[0] and password not in runs[1]  # shown once
    assert f"the password in {data / 'password'}" in runs[1] and "project 3: log in at http://127.0.0.1" in runs[1]
    for secret in (data / "password", data / "token"):
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600, secret
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
