"""What the three Label Studio reviews share: the project folder, images served as local files,
reading Label Studio's JSON export back into labelled rows, and creating the project on a
running Label Studio. The reviews themselves: ``reflvqa.label_studio`` (RefLVQA citation
verification, seed 004 Table 3), ``label_studio_judges`` (the evaluation judge against people:
DeflectionBench Table 7, RefLVQA's evaluator checks) and ``reflectv.label_studio``
(ReflectV's blind Table 6 ratings, seed 002 appendix A.2).

A project folder (``mmcurate annotate export ... --format label-studio --out DIR``) holds the
CSV path's batch (``batch.jsonl``/``batch.csv``, drawn by the CSV path's own code: the same
items, the same seeded sampling, the same refusals), ``tasks.json`` (one Label Studio task per
batch row; every task's data carries the row's ``item_id``), one labeling config ``<review>.xml``
and ``images/``. A folder where Label Studio already ran (``DIR/.label-studio``, what
``make review-ui`` keeps there, annotations included) is labelled work: an export over it is
refused unless ``--force``, which removes it with the rest of the old project.

Import turns each annotation of one or more Label Studio JSON exports into one labelled row of
its annotator (named by e-mail when the export carries it, else ``annotator-<user id>``),
written as one JSONL file per annotator in the batch format, and hands those files to the CSV
path's import: the numbers come from the one rule. A task without ``item_id``, an item id the
batch does not hold, an item annotated twice by one person, an annotator given by two exports,
or a choice outside the review's vocabulary is a one-line error naming the export and task; a
cancelled (skipped) annotation is no label.

Label Studio facts relied on (labelstud.io, Label Studio 1.23 as ``make review-setup``
installs it):
- tags (labelstud.io/tags, labelstud.io/tags/choices): ``View``, ``Header``, ``Text`` and
  ``Image`` show data (``value="$field"``); ``Choices``/``Choice`` (``choice="single-radio"``,
  ``required``, ``showInline``) and, with ``value="$field"``, choices loaded from the task
  ("dynamic choices": a list of ``{"value": ...}``; tests/review/test_label_studio_server.py
  sees them render);
  ``Repeater`` (``on="$list"``, ``indexFlag``, default ``{{idx}}``) repeats its body per list
  element, the index replacing the flag in names and values (labelstud.io/tags/repeater;
  HumanSignal/label-studio web/libs/editor/src/tags/visual/Repeater.js);
- the JSON export (labelstud.io/guide/task_format, "Label Studio JSON format of annotated
  tasks"): a list of tasks, each with ``id``, ``data`` and ``annotations``; an annotation has
  ``result`` (a choice: ``{"from_name", "to_name", "type": "choices", "value": {"choices":
  [...]}}``), ``was_cancelled`` and ``completed_by`` (a user id in the guide; the export's
  ``CompletedBySerializer``, label_studio/data_export/serializers.py, gives ``{"id", "email",
  ...}``);
- local files (labelstud.io/guide/storage#Local-storage): served under
  ``/data/local-files/?d=<path below LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT>`` once
  ``LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED`` is set and the project has a Local Files storage
  on the folder (``POST /api/storages/localfiles``); the project folder is the document root,
  so one Label Studio serves one review folder;
- REST API (labelstud.io/api): ``GET/POST /api/projects``, ``POST /api/projects/{id}/import``
  (a list of tasks), ``GET /api/projects/{id}/export?exportType=JSON``, token auth
  ``Authorization: Token <key>``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmcurate.core.errors import MmcurateError

TASKS = "tasks.json"
IMAGES = "images"
LOCAL_FILES = "/data/local-files/?d="
SERVER_DATA = ".label-studio"  # Label Studio's database when `make review-ui` ran on the folder
IMAGE_MAX_WIDTH = "320px"  # keeps the text to judge and the choices near the top of the labeling page
TITLE = "mmcurate {review} review: {folder}"  # the project's title on Label Studio
WAIT_LIMIT = 86_400.0
LOOPBACK = "127.0.0.1"  # the only address Label Studio listens on
USERNAME = "reviewer@localhost"  # the Label Studio user `make review-ui` creates
TEMPORARY = "mmcurate-label-studio-"  # an import's annotator files: <prefix><pid>-<random> in the temporary folder


def local_file(name: str) -> str:
    """The URL Label Studio serves ``images/<name>`` of the project folder under."""
    return f"{LOCAL_FILES}{IMAGES}/{name}"


def refuse_over_server_data(out: Path, force: bool) -> None:
    """Refuse to export over a folder Label Studio ran on (its annotations would be stranded)
    unless ``force``; called before anything is written (``write_project`` then removes it)."""
    data = out / SERVER_DATA
    if data.exists() and not force:
        raise MmcurateError(
            f"{out} holds a Label Studio project people may have labelled ({data}); export to "
            "another --out, or pass --force to replace it"
        )


def write_images(out: Path, images: Mapping[str, Mapping[str, Any] | None]) -> dict[str, str]:
    """Write each embedded image struct (``bytes``, ``path``) of ``images`` (key -> image) into
    ``out/images`` under its store name; key -> its Label Studio URL (keys without bytes have none)."""
    (out / IMAGES).mkdir(parents=True, exist_ok=True)
    urls: dict[str, str] = {}
    for key, image in images.items():
        if image and image.get("bytes"):
            name = Path(str(image.get("path") or key)).name
            target = out / IMAGES / name
            if not target.exists():
                target.write_bytes(image["bytes"])
            urls[key] = local_file(name)
    return urls


def write_project(out: Path, name: str, config: str, tasks: list[dict[str, Any]]) -> None:
    """``out/tasks.json`` and the labeling config ``out/<name>.xml`` (the only config there); the
    database of a Label Studio that ran on the old export goes (``refuse_over_server_data``)."""
    shutil.rmtree(out / SERVER_DATA, ignore_errors=True)
    for old in out.glob("*.xml"):
        old.unlink()
    (out / TASKS).write_text(json.dumps(tasks, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / f"{name}.xml").write_text(config, encoding="utf-8")


def project_config(out: Path | str) -> Path:
    """The labeling config of an exported project folder."""
    configs = sorted(Path(out).glob("*.xml"))
    if len(configs) != 1 or not (Path(out) / TASKS).is_file():
        raise MmcurateError(
            f"{out}: not a Label Studio project folder (expected {TASKS} and one labeling config "
            "*.xml, as `mmcurate annotate export --format label-studio` writes)"
        )
    return configs[0]


def choices_xml(name: str, to: str, values: Iterable[str] | None = None, required: bool = True) -> str:
    """A single-choice ``Choices`` control: fixed ``values``, or (None) the task's ``choices`` list."""
    attrs = f'name="{name}" toName="{to}" choice="single-radio" showInline="true"'
    attrs += ' required="true"' if required else ""
    if values is None:
        return f'<Choices {attrs} value="$choices"/>'
    body = "".join(f'<Choice value="{v}"/>' for v in values)
    return f"<Choices {attrs}>{body}</Choices>"


def image_xml(name: str, value: str) -> str:
    """An ``Image`` no wider than ``IMAGE_MAX_WIDTH`` (labelstud.io/tags/image: ``width`` 100% and
    ``maxWidth`` 750px by default, so a 160-px image is scaled up to fill the panel and pushes
    the text to judge and the choices below the fold)."""
    return f'<Image name="{name}" value="{value}" maxWidth="{IMAGE_MAX_WIDTH}"/>'


def dynamic_choices(values: Iterable[str]) -> list[dict[str, str]]:
    """A task's ``choices`` for ``choices_xml(..., values=None)``."""
    return [{"value": v} for v in values]


# ---------------------------------------------------------------------------- import
@dataclass(frozen=True)
class Annotation:
    who: str
    item: str  # the batch's item_id
    result: list[dict[str, Any]]
    data: dict[str, Any]  # the task's data
    where: str  # "<export>: task <id>", for errors


_KINDS: dict[type, str] = {list: "a list", Mapping: "an object", str: "a string"}


def _kind(value: Any) -> str:
    """How a JSON value is named in an error: "a list", "an object", "null", "a number"..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return next((name for kind, name in _KINDS.items() if isinstance(value, kind)), type(value).__name__)


def field(where: str, value: Any, name: str, kind: type) -> Any:
    """``value`` (``name`` of the export at ``where``) when it is a ``kind`` (list, Mapping,
    str); else the one-line error naming the task and the field."""
    if not isinstance(value, kind):
        raise MmcurateError(
            f"{where}: {name} is {_kind(value)}; expected {_KINDS[kind]} (a Label Studio JSON export's task format)"
        )
    return value


def _annotator(annotation: Mapping[str, Any], where: str) -> str:
    """The annotator's name: the e-mail of ``completed_by`` (an object in Label Studio's export,
    ``{"id", "email", ...}``), else that of ``created_username`` (``"<name> <e-mail>, <id>"``),
    else ``annotator-<user id>``."""
    who = annotation.get("completed_by")
    if isinstance(who, Mapping):
        if who.get("email"):
            return str(who["email"])
        who = who.get("id")
    username = annotation.get("created_username")
    if isinstance(username, str) and username.strip():
        words = username.rsplit(",", 1)[0].split()
        return next((w for w in reversed(words) if "@" in w), words[-1] if words else f"annotator-{who}")
    if isinstance(who, (int, str)) and not isinstance(who, bool) and str(who).strip():
        return f"annotator-{who}"
    raise MmcurateError(
        f'{where}: completed_by is {_kind(who)}; expected the annotator (a user id or {{"id", "email"}})'
    )


def read_export(path: Path) -> list[dict[str, Any]]:
    try:
        tasks = json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise MmcurateError(f"{path}: not a Label Studio JSON export (nested too deeply to read)") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise MmcurateError(f"{path}: not a Label Studio JSON export ({str(exc).splitlines()[0]})") from None
    if not isinstance(tasks, list) or not all(isinstance(t, Mapping) for t in tasks):
        raise MmcurateError(f"{path}: not a Label Studio JSON export (expected a list of tasks)")
    return tasks


def export_annotations(export: Path | str, known: Collection[str], what: str) -> Iterator[Annotation]:
    """Every annotation not cancelled of a Label Studio JSON export, checked: its task's
    ``item_id`` must be one of ``known`` (else "item_id ... is not <what>"), nobody annotates
    an item twice, and every field read has the export format's shape (else a one-line error
    naming the task and the field)."""
    path = Path(export)
    seen: set[tuple[str, str]] = set()
    for task in read_export(path):
        where = f"{path}: task {task.get('id')}"
        data = field(where, task.get("data"), "data", Mapping)
        item = data.get("item_id")
        if item in (None, ""):
            raise MmcurateError(f"{where} has no item_id: not a task of an mmcurate export")
        item = str(field(where, item, "data.item_id", str))
        if item not in known:
            raise MmcurateError(f"{where}: item_id {item!r} is not {what}")
        for n, annotation in enumerate(field(where, task.get("annotations", []), "annotations", list)):
            annotation = field(where, annotation, f"annotations[{n}]", Mapping)
            if annotation.get("was_cancelled"):
                continue
            who = _annotator(annotation, f"{where}: annotations[{n}]")
            if (who, item) in seen:
                raise MmcurateError(f"{where}: item {item!r} annotated twice by {who}")
            seen.add((who, item))
            result = field(where, annotation.get("result", []), f"annotations[{n}].result", list)
            for k, region in enumerate(result):
                field(where, region, f"annotations[{n}].result[{k}]", Mapping)
            yield Annotation(who, item, result, data, where)


def single_choice(annotation: Annotation, name: str, allowed: Collection[str]) -> str:
    """The one choice of control ``name`` in ``annotation`` ("" when it has none), one of ``allowed``."""
    found = [r for r in annotation.result if r.get("from_name") == name]
    if not found:
        return ""
    value = field(annotation.where, found[0].get("value"), f"{name}'s value", Mapping)
    choices = value.get("choices")
    if isinstance(choices, str):  # Label Studio writes a list; a lone string says the same
        choices = [choices]
    choices = field(annotation.where, choices, f"{name}'s value.choices", list)
    expected = f"expected one of {', '.join(allowed)}"
    if len(choices) != 1:
        raise MmcurateError(
            f"{annotation.where}: {name} has {len(choices)} choices ({', '.join(map(str, choices))}); "
            f"{expected}, exactly one"
        )
    if str(choices[0]) not in allowed:
        raise MmcurateError(f"{annotation.where}: {name} is {choices!r}; {expected}")
    return str(choices[0])


def remove_stale_temporaries() -> list[Path]:
    """Remove the temporary folders of imports that were killed (``kill -9`` skips the removal
    ``labelled_files`` does on exit): folders ``mmcurate-label-studio-<pid>-*`` of this user
    whose process no longer runs. Returns the folders removed."""
    removed = []
    for folder in sorted(Path(tempfile.gettempdir()).glob(f"{TEMPORARY}*")):
        found = re.fullmatch(rf"{re.escape(TEMPORARY)}(\d+)-.+", folder.name)
        try:
            ours = folder.is_dir() and not folder.is_symlink() and folder.stat().st_uid == os.getuid()
        except OSError:
            continue
        if found and ours and not _alive(int(found.group(1))):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


@contextmanager
def labelled_files(
    exports: Iterable[Path | str], known: Collection[str], what: str, row: Callable[[Annotation], dict[str, Any]]
) -> Iterator[list[Path]]:
    """One JSONL file per annotator (``row`` of each annotation, with its ``annotator``) of the
    Label Studio ``exports``, in a temporary folder while the block runs: what the CSV path's
    import reads. An error of that import naming ``file:line`` of one of these files is raised
    naming the export and task of that row instead. The folder is named after this process, so
    ``remove_stale_temporaries`` finds it when the process was killed."""
    per_annotator: dict[str, list[tuple[Annotation, dict[str, Any]]]] = {}
    given = False
    for export in exports:
        given = True
        mine: dict[str, list[tuple[Annotation, dict[str, Any]]]] = {}
        for annotation in export_annotations(export, known, what):
            mine.setdefault(annotation.who, []).append((annotation, {**row(annotation), "annotator": annotation.who}))
        for who, rows in mine.items():
            if who in per_annotator:
                raise MmcurateError(f"{export}: annotator {who!r} already given by another export")
            per_annotator[who] = rows
    if not given:
        raise MmcurateError("give at least one Label Studio JSON export")
    with tempfile.TemporaryDirectory(prefix=f"{TEMPORARY}{os.getpid()}-") as folder:
        files: dict[Path, list[Annotation]] = {}
        for index, (_, rows) in enumerate(sorted(per_annotator.items())):
            file = Path(folder) / f"annotator-{index}.jsonl"
            file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for _, r in rows), encoding="utf-8")
            files[file] = [a for a, _ in rows]
        try:
            yield list(files)
        except MmcurateError as exc:
            for file, written in files.items():
                found = re.match(rf"{re.escape(str(file))}:(\d+): (.*)", str(exc))
                if found:
                    annotation = written[int(found.group(1)) - 1]
                    raise MmcurateError(f"{annotation.where} ({annotation.who}): {found.group(2)}") from None
            raise


# ---------------------------------------------------------------------------- server
def server_command(binary: Path | str, port: int) -> list[str]:
    """The command starting Label Studio on loopback only. ``--internal-host`` is the address its
    web server binds (default 0.0.0.0: every interface); ``--host`` is only the URL it writes
    into links (label_studio/core/argparser.py and server.py of 1.23), left empty: relative."""
    return [str(binary), "start", "--no-browser", "--internal-host", LOOPBACK, "--port", str(port)]


def server_env(review: Path, token: str, password: str, data: Path | None = None) -> dict[str, str]:
    """Label Studio's environment serving ``review``'s local files: its user (created, or its
    password reset, on start), the API token, SQLite in ``data`` (default ``review/.label-studio``)."""
    review = review.resolve()
    return {
        **os.environ,
        "LABEL_STUDIO_USERNAME": USERNAME,
        "LABEL_STUDIO_PASSWORD": password,
        "LABEL_STUDIO_USER_TOKEN": token,
        "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
        "LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED": "true",
        "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(review),
        "LABEL_STUDIO_BASE_DATA_DIR": str(data or review / SERVER_DATA),
        "SENTRY_DSN": "",
    }


def secret(path: Path) -> tuple[str, bool]:
    """The secret kept in ``path`` (mode 0600, made so if it was not), or a new random one written
    there; and whether it is new."""
    if path.is_file() and path.read_text(encoding="utf-8").strip():
        path.chmod(0o600)
        return path.read_text(encoding="utf-8").strip(), False
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(18)
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(handle, "w", encoding="utf-8") as file:
        file.write(value + "\n")
    path.chmod(0o600)
    return value, True


def serve(
    review: Path | str, binary: Path | str, port: int, wait: float = 1800.0, say: Callable[[str], None] = print
) -> int:
    """Run Label Studio on ``127.0.0.1:port`` serving ``review`` (``server_command``,
    ``server_env``), push its project, ``say`` how to log in, and wait until it exits (its exit
    status) or this process is interrupted (it is stopped). The API token is
    ``review/.label-studio/token``; the password ``LABEL_STUDIO_PASSWORD``, else a random one
    kept in ``review/.label-studio/password`` (both 0600), said once: when it is made up."""
    import subprocess

    review = Path(review).resolve()
    project_config(review)
    data = review / SERVER_DATA
    data.mkdir(exist_ok=True)
    data.chmod(0o700)  # its database, token and password: this user's only
    token, _ = secret(data / "token")
    if os.environ.get("LABEL_STUDIO_PASSWORD"):
        password, where = os.environ["LABEL_STUDIO_PASSWORD"], "the password in LABEL_STUDIO_PASSWORD"
    else:
        password, new = secret(data / "password")
        where = f"the password in {data / 'password'}"
        if new:
            say(f"Label Studio password of {USERNAME}: {password} (shown once; kept in {data / 'password'}, 0600)")
    url = f"http://{LOOPBACK}:{port}"
    process = subprocess.Popen(server_command(binary, port), env=server_env(review, token, password))
    try:
        project = push_project(review, url, token, wait=wait, server_pid=process.pid)
        say(
            f"project {project}: log in at {url}/projects/{project}/data as {USERNAME} with {where}; "
            "Ctrl-C stops Label Studio"
        )
        return process.wait()
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def project_storage(out: Path | str) -> dict[str, Any]:
    """The Local Files storage a project needs to show the export's images (Label Studio's
    ``POST /api/storages/localfiles`` body, without the project id)."""
    return {"title": "mmcurate review images", "path": str((Path(out) / IMAGES).resolve()), "use_blob_urls": False}


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, exited but not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def wait_for_server(client: Any, url: str, wait: float, server_pid: int | None = None, poll: float = 2.0) -> None:
    """Return once Label Studio at ``url`` answers below 500. A server that is up but not ready
    (5xx, a reset or read error, a slow connect) is waited for up to ``wait`` seconds. A refused
    or unresolvable connection means nothing listens: an error at once, unless ``server_pid``
    (the Label Studio just started, which migrates its database before it listens) still runs."""
    import httpx

    if not 0 < wait <= WAIT_LIMIT:
        raise MmcurateError(f"--wait must be in (0, {WAIT_LIMIT:g}] seconds, got {wait:g}")
    deadline = time.monotonic() + wait
    while True:
        try:
            status = client.get("/api/projects").status_code
            if status < 500:
                return
            last = f"it answers {status}"
        except httpx.ConnectError as exc:
            if server_pid is None:
                raise MmcurateError(
                    f"nothing listens at {url} ({exc}): start Label Studio first "
                    "(make review-ui REVIEW=<folder>), or give its --url"
                ) from None
            if not _alive(server_pid):
                raise MmcurateError(
                    f"Label Studio (process {server_pid}) exited before it listened at {url}; see its log"
                ) from None
            last = "it is still starting (nothing listens yet)"
        except httpx.TransportError as exc:
            last = f"{type(exc).__name__}: {exc}"
        if time.monotonic() > deadline:
            raise MmcurateError(f"Label Studio at {url} was not ready within {wait:g} s ({last})")
        time.sleep(poll)


class _Api:
    """Label Studio's REST API at ``url`` with token auth; a failed call is a one-line error."""

    def __init__(self, url: str, token: str) -> None:
        import httpx

        self.url = url.rstrip("/")
        self.client = httpx.Client(base_url=self.url, headers={"Authorization": f"Token {token}"}, timeout=120)

    def __call__(self, method: str, path: str, **body: Any) -> Any:
        import httpx

        try:
            reply = self.client.request(method, path, **body)
        except httpx.HTTPError as exc:
            raise MmcurateError(f"Label Studio at {self.url}: {type(exc).__name__}: {exc}") from None
        if reply.status_code >= 400:
            raise MmcurateError(
                f"Label Studio at {self.url}: {method} {path} -> {reply.status_code} {reply.text[:200]}"
            )
        return reply.json()

    def project(self, out: Path) -> tuple[str, int | None]:
        """The title of ``out``'s project (it names the review and the folder) and its id, if pushed."""
        title = TITLE.format(review=project_config(out).stem, folder=out.resolve().name)
        found = [
            p
            for p in self("GET", "/api/projects", params={"title": title}).get("results", [])
            if p.get("title") == title
        ]
        return title, int(found[0]["id"]) if found else None


def push_project(out: Path | str, url: str, token: str, wait: float = 900.0, server_pid: int | None = None) -> int:
    """Create the exported project on a Label Studio through its REST API (the labeling config,
    the Local Files storage on ``out/images``, the tasks); returns the project id. Label Studio
    must serve local files with ``out`` as its document root. A project of the same title is
    returned as it is (pushed before: a second ``make review-ui`` on the same folder); the title
    names the review and the folder."""
    out = Path(out)
    config = project_config(out)
    api = _Api(url, token)
    with api.client:
        wait_for_server(api.client, url, wait, server_pid)
        title, existing = api.project(out)
        if existing is not None:
            return existing
        project = api("POST", "/api/projects", json={"title": title, "label_config": config.read_text()})
        api("POST", "/api/storages/localfiles", json={"project": project["id"], **project_storage(out)})
        api("POST", f"/api/projects/{project['id']}/import", json=json.loads((out / TASKS).read_text()))
    return int(project["id"])


def pull_export(out: Path | str, url: str, token: str, target: Path | str) -> tuple[int, list[str]]:
    """Save the JSON export of ``out``'s project on the Label Studio at ``url`` to ``target``,
    each annotation's ``completed_by`` the annotator's ``{"id", "email"}``: Label Studio's own
    export (``GET /api/projects/{id}/export?exportType=JSON``, what its Export button gives)
    names annotators by user id only, and the import would name them ``annotator-<id>``.
    Returns the project id and the annotators' e-mails."""
    out, target = Path(out), Path(target)
    api = _Api(url, token)
    with api.client:
        wait_for_server(api.client, url, 60.0)
        _, project = api.project(out)
        if project is None:
            raise MmcurateError(
                f"Label Studio at {api.url} has no project of {out} (push it first: make review-ui REVIEW={out})"
            )
        tasks = api("GET", f"/api/projects/{project}/export", params={"exportType": "JSON"})
        users = api("GET", "/api/users/")
    emails = {u["id"]: u["email"] for u in (users.get("results", []) if isinstance(users, Mapping) else users)}
    for task in tasks:
        for annotation in task.get("annotations") or []:
            who = annotation.get("completed_by")
            if not isinstance(who, Mapping) and who in emails:
                annotation["completed_by"] = {"id": who, "email": emails[who]}
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_text(json.dumps(tasks, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    partial.replace(target)
    named = {
        a["completed_by"].get("email")
        for t in tasks
        for a in t.get("annotations") or []
        if isinstance(a.get("completed_by"), Mapping)
    }
    return project, sorted(filter(None, named))
