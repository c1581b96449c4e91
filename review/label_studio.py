"""What the three Label Studio reviews share: the project folder, images served as local files,
reading Label Studio's JSON export back into labelled rows, and creating the project on a
running Label Studio. The reviews themselves: ``label_studio_citations`` (RefLVQA citation
verification, seed 004 Table 3), ``label_studio_judges`` (the evaluation judge against people:
DeflectionBench Table 7, RefLVQA's evaluator checks) and ``label_studio_trajectories``
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
TITLE = "mmcurate {review} review: {folder}"  # the project's title on Label Studio
WAIT_LIMIT = 86_400.0


def local_file(name: str) -> str:
    """The URL Label Studio serves ``images/<name>`` of the project folder under."""
    return f"{LOCAL_FILES}{IMAGES}/{name}"


def refuse_over_server_data(out: Path, force: bool) -> None:
    """Refuse to export over a folder Label Studio ran on (its annotations would be stranded)
    unless ``force``; called before anything is written (``write_project`` then removes it)."""
    data = out / SERVER_DATA
    if data.exists() and not force:
        raise MmcurateError(f"{out} holds a Label Studio project people may have labelled ({data}); export to "
                            "another --out, or pass --force to replace it")


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
        raise MmcurateError(f"{out}: not a Label Studio project folder (expected {TASKS} and one labeling config "
                            "*.xml, as `mmcurate annotate export --format label-studio` writes)")
    return configs[0]


def choices_xml(name: str, to: str, values: Iterable[str] | None = None, required: bool = True) -> str:
    """A single-choice ``Choices`` control: fixed ``values``, or (None) the task's ``choices`` list."""
    attrs = f'name="{name}" toName="{to}" choice="single-radio" showInline="true"'
    attrs += ' required="true"' if required else ""
    if values is None:
        return f'<Choices {attrs} value="$choices"/>'
    body = "".join(f'<Choice value="{v}"/>' for v in values)
    return f"<Choices {attrs}>{body}</Choices>"


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


def _annotator(annotation: Mapping[str, Any]) -> str:
    who = annotation.get("completed_by")
    if isinstance(who, Mapping):
        return str(who.get("email") or f"annotator-{who.get('id')}")
    return str(annotation.get("created_username") or f"annotator-{who}").split(",")[0].strip()


def read_export(path: Path) -> list[dict[str, Any]]:
    try:
        tasks = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise MmcurateError(f"{path}: not a Label Studio JSON export ({str(exc).splitlines()[0]})") from None
    if not isinstance(tasks, list) or not all(isinstance(t, Mapping) for t in tasks):
        raise MmcurateError(f"{path}: not a Label Studio JSON export (expected a list of tasks)")
    return tasks


def annotations(export: Path | str, known: Collection[str], what: str) -> Iterator[Annotation]:
    """Every annotation not cancelled of a Label Studio JSON export, checked: its task's
    ``item_id`` must be one of ``known`` (else "item_id ... is not <what>"), and nobody
    annotates an item twice."""
    path = Path(export)
    seen: set[tuple[str, str]] = set()
    for task in read_export(path):
        data = task.get("data") or {}
        item = str(data.get("item_id") or "")
        where = f"{path}: task {task.get('id')}"
        if not item:
            raise MmcurateError(f"{where} has no item_id: not a task of an mmcurate export")
        if item not in known:
            raise MmcurateError(f"{where}: item_id {item!r} is not {what}")
        for annotation in task.get("annotations") or []:
            if annotation.get("was_cancelled"):
                continue
            who = _annotator(annotation)
            if (who, item) in seen:
                raise MmcurateError(f"{where}: item {item!r} annotated twice by {who}")
            seen.add((who, item))
            yield Annotation(who, item, list(annotation.get("result") or []), data, where)


def single_choice(annotation: Annotation, name: str, allowed: Collection[str]) -> str:
    """The one choice of control ``name`` in ``annotation`` ("" when it has none), one of ``allowed``."""
    found = [r for r in annotation.result if r.get("from_name") == name]
    if not found:
        return ""
    choices = (found[0].get("value") or {}).get("choices") or []
    if isinstance(choices, str):  # Label Studio writes a list; a lone string says the same
        choices = [choices]
    expected = f"expected one of {', '.join(allowed)}"
    if not isinstance(choices, list):
        raise MmcurateError(f"{annotation.where}: {name} is {choices!r}, not a list of choices; {expected}")
    if len(choices) != 1:
        raise MmcurateError(f"{annotation.where}: {name} has {len(choices)} choices ({', '.join(map(str, choices))}); "
                            f"{expected}, exactly one")
    if str(choices[0]) not in allowed:
        raise MmcurateError(f"{annotation.where}: {name} is {choices!r}; {expected}")
    return str(choices[0])


@contextmanager
def labelled_files(exports: Iterable[Path | str], known: Collection[str], what: str,
                   row: Callable[[Annotation], dict[str, Any]]) -> Iterator[list[Path]]:
    """One JSONL file per annotator (``row`` of each annotation, with its ``annotator``) of the
    Label Studio ``exports``, in a temporary folder while the block runs: what the CSV path's
    import reads. An error of that import naming ``file:line`` of one of these files is raised
    naming the export and task of that row instead."""
    per_annotator: dict[str, list[tuple[Annotation, dict[str, Any]]]] = {}
    given = False
    for export in exports:
        given = True
        mine: dict[str, list[tuple[Annotation, dict[str, Any]]]] = {}
        for annotation in annotations(export, known, what):
            mine.setdefault(annotation.who, []).append((annotation, {**row(annotation), "annotator": annotation.who}))
        for who, rows in mine.items():
            if who in per_annotator:
                raise MmcurateError(f"{export}: annotator {who!r} already given by another export")
            per_annotator[who] = rows
    if not given:
        raise MmcurateError("give at least one Label Studio JSON export")
    with tempfile.TemporaryDirectory(prefix="mmcurate-label-studio-") as folder:
        files: dict[Path, list[Annotation]] = {}
        for index, (who, rows) in enumerate(sorted(per_annotator.items())):
            file = Path(folder) / f"annotator-{index}.jsonl"
            file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for _, r in rows), encoding="utf-8")
            files[file] = [a for a, _ in rows]
        try:
            yield list(files)
        except MmcurateError as exc:
            for file, rows in files.items():
                found = re.match(rf"{re.escape(str(file))}:(\d+): (.*)", str(exc))
                if found:
                    annotation = rows[int(found.group(1)) - 1]
                    raise MmcurateError(f"{annotation.where} ({annotation.who}): {found.group(2)}") from None
            raise


# ---------------------------------------------------------------------------- server
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
                raise MmcurateError(f"nothing listens at {url} ({exc}): start Label Studio first "
                                    "(make review-ui REVIEW=<folder>), or give its --url") from None
            if not _alive(server_pid):
                raise MmcurateError(f"Label Studio (process {server_pid}) exited before it listened at {url}; "
                                    "see its log") from None
            last = "it is still starting (nothing listens yet)"
        except httpx.TransportError as exc:
            last = f"{type(exc).__name__}: {exc}"
        if time.monotonic() > deadline:
            raise MmcurateError(f"Label Studio at {url} was not ready within {wait:g} s ({last})")
        time.sleep(poll)


def push_project(out: Path | str, url: str, token: str, wait: float = 900.0, server_pid: int | None = None) -> int:
    """Create the exported project on a Label Studio through its REST API (the labeling config,
    the Local Files storage on ``out/images``, the tasks); returns the project id. Label Studio
    must serve local files with ``out`` as its document root. A project of the same title is
    returned as it is (pushed before: a second ``make review-ui`` on the same folder); the title
    names the review and the folder."""
    import httpx

    out = Path(out)
    config = project_config(out)
    title = TITLE.format(review=config.stem, folder=out.resolve().name)
    client = httpx.Client(base_url=url.rstrip("/"), headers={"Authorization": f"Token {token}"}, timeout=120)

    def call(method: str, path: str, **body: Any) -> Any:
        try:
            reply = client.request(method, path, **body)
        except httpx.HTTPError as exc:
            raise MmcurateError(f"Label Studio at {url}: {type(exc).__name__}: {exc}") from None
        if reply.status_code >= 400:
            raise MmcurateError(f"Label Studio at {url}: {method} {path} -> {reply.status_code} {reply.text[:200]}")
        return reply.json()

    with client:
        wait_for_server(client, url, wait, server_pid)
        existing = [p for p in call("GET", "/api/projects", params={"title": title}).get("results", [])
                    if p.get("title") == title]
        if existing:
            return int(existing[0]["id"])
        project = call("POST", "/api/projects", json={"title": title, "label_config": config.read_text()})
        call("POST", "/api/storages/localfiles", json={"project": project["id"], **project_storage(out)})
        call("POST", f"/api/projects/{project['id']}/import", json=json.loads((out / TASKS).read_text()))
    return int(project["id"])
