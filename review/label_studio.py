"""RefLVQA's citation verification (seed 004, 3.3-3.4; Table 3) as a Label Studio project,
and Label Studio's JSON export read back into the labels the CSV path reads.

Export: the batch ``review.citations.export_batch`` draws (the same items, the same seeded
sampling, written as ``batch.jsonl``/``batch.csv`` as before) becomes ``tasks.json`` (one
Label Studio task per item: the question and its image, the answer, the sentence, and every
shown document, cited first, each with its yes/no), ``citations.xml`` (the labeling
config: the paper's three questions and the per-document support, every one required but
the per-document ones, which the CSV path leaves optional too) and ``images/`` with every
image a task shows. Label Studio serves local files under
``/data/local-files/?d=<path below LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT>``: the export
folder is that root (``make review-ui REVIEW=<folder>`` starts Label Studio so), and the
project needs a Local Files storage on ``<folder>/images`` (which ``project_storage`` gives).

Import: each annotation of Label Studio's JSON export becomes one labelled row of its
annotator (named by e-mail when the export carries it, else ``annotator-<user id>``), written
as one JSONL file per annotator in the batch format, and ``review.citations.import_labels``
reads those files: agreement, kappa, Table 3 and the judge's F1 are computed by the one rule
the CSV path uses. A task id the batch does not hold, an item annotated twice by one person or
a choice outside yes/no is a one-line error; a skipped or cancelled annotation is no label.
"""
from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import polars as pl

from mmcurate.core.errors import MmcurateError

from .batches import cell_list
from .citations import QUESTIONS, ExportResult, ImportResult, export_batch, import_labels, release_items

TASKS = "tasks.json"
CONFIG = "citations.xml"
IMAGES = "images"
LOCAL_FILES = "/data/local-files/?d="
PROMPTS = {
    "needs_verification": "Does the sentence need fact verification?",
    "documents_support": "Do the cited documents support the sentence? (no when none is cited)",
    "sentence_grounded": "Is the sentence grounded by the cited documents? (no when none is cited)",
}


def labeling_config() -> str:
    """The project's labeling config: the sentence in its context, the three questions, then
    each shown document (a Repeater over the task's ``documents``) with its own yes/no."""
    questions = "\n".join(
        f'  <Header value="{escape(PROMPTS[q])}"/>\n'
        f'  <Choices name="{q}" toName="sentence" choice="single-radio" required="true">\n'
        f'    <Choice value="yes"/>\n    <Choice value="no"/>\n  </Choices>' for q in QUESTIONS)
    return f"""<View>
  <Header value="Question"/>
  <Text name="question" value="$question"/>
  <Image name="image" value="$image"/>
  <Header value="Answer"/>
  <Text name="answer" value="$answer"/>
  <Header value="Sentence to verify"/>
  <Text name="sentence" value="$sentence"/>
{questions}
  <Header value="Shown documents: does each support the sentence?"/>
  <Repeater on="$documents" indexFlag="{{{{idx}}}}">
    <View>
      <Text name="document_{{{{idx}}}}" value="$documents[{{{{idx}}}}].label"/>
      <Image name="document_image_{{{{idx}}}}" value="$documents[{{{{idx}}}}].image"/>
      <Choices name="document_support_{{{{idx}}}}" toName="document_{{{{idx}}}}" choice="single-radio">
        <Choice value="yes"/>
        <Choice value="no"/>
      </Choices>
    </View>
  </Repeater>
</View>
"""


def _image_files(release: Path, out: Path, shown: set[str]) -> dict[str, str]:
    """Write the question images of ``shown`` samples and every image document; sample id or
    doc id -> the Label Studio URL of its file."""
    (out / IMAGES).mkdir(parents=True, exist_ok=True)
    urls: dict[str, str] = {}

    def put(key: str, image: Mapping[str, Any] | None) -> None:
        if image and image.get("bytes"):
            name = Path(str(image.get("path") or key)).name
            (out / IMAGES / name).write_bytes(image["bytes"])
            urls[key] = f"{LOCAL_FILES}{IMAGES}/{name}"

    qa = pl.read_parquet(sorted((release / "data").glob("qa-*.parquet")), columns=["sample_id", "images"])
    for row in qa.filter(pl.col("sample_id").is_in(sorted(shown))).to_dicts():
        put(row["sample_id"], (row["images"] or [None])[0])
    for config in ("documents", "knowledge_base"):
        table = pl.read_parquet(sorted((release / "data").glob(f"{config}-*.parquet")), columns=["doc_id", "image"])
        for row in table.filter(pl.col("image").is_not_null()).to_dicts():
            if row["doc_id"] not in urls:
                put(row["doc_id"], row["image"])
    return urls


def _task(item: Mapping[str, Any], urls: Mapping[str, str]) -> dict[str, Any]:
    cited, others = cell_list(item["document_ids"]), cell_list(item["rejected_ids"])
    texts = [*filter(None, str(item["documents"]).split("\n\n")), *filter(None, str(item["rejected_documents"])
                                                                          .split("\n\n"))]
    documents = [{"doc_id": doc, "cited": index < len(cited),
                  "label": f"{'cited' if index < len(cited) else 'not cited'}: {text}",
                  "image": urls.get(doc, "")}
                 for index, (doc, text) in enumerate(zip([*cited, *others], texts))]
    return {"data": {"item_id": item["item_id"], "question": item["question"], "image": urls.get(item["sample_id"], ""),
                     "answer": item["answer"], "sentence": item["sentence"], "documents": documents}}


def export_project(release: Path | str, n: int, out: Path | str, seed: int = 0, rejected: int | None = None,
                   force: bool = False) -> ExportResult:
    """The batch (``export_batch``, same refusals) and its Label Studio project files in ``out``."""
    release, out = Path(release), Path(out)
    batch = export_batch(release, n, out, seed=seed, rejected=rejected, force=force)
    items = [json.loads(line) for line in batch.jsonl.read_text(encoding="utf-8").splitlines() if line]
    urls = _image_files(release, out, {i["sample_id"] for i in items})
    (out / TASKS).write_text(json.dumps([_task(item, urls) for item in items], indent=1, ensure_ascii=False) + "\n",
                             encoding="utf-8")
    (out / CONFIG).write_text(labeling_config(), encoding="utf-8")
    return batch


def project_storage(out: Path | str) -> dict[str, Any]:
    """The Local Files storage a project needs to show the export's images (Label Studio's
    ``POST /api/storages/localfiles`` body, without the project id)."""
    return {"title": "mmcurate review images", "path": str((Path(out) / IMAGES).resolve()), "use_blob_urls": False}


# ---------------------------------------------------------------------------- import
def _annotator(annotation: Mapping[str, Any]) -> str:
    who = annotation.get("completed_by")
    if isinstance(who, Mapping):
        return str(who.get("email") or f"annotator-{who.get('id')}")
    return str(annotation.get("created_username") or f"annotator-{who}").split(",")[0].strip()


def _choice(result: Iterable[Mapping[str, Any]], name: str, where: str) -> str:
    found = [r for r in result if r.get("from_name") == name]
    if not found:
        return ""
    choices = found[0].get("value", {}).get("choices") or []
    if len(choices) != 1 or str(choices[0]).lower() not in ("yes", "no"):
        raise MmcurateError(f"{where}: {name} is {choices!r}; expected one of yes, no")
    return str(choices[0]).lower()


def labelled_rows(export: Path | str, known: set[str]) -> dict[str, list[dict[str, Any]]]:
    """Annotator -> labelled rows (the batch format) of a Label Studio JSON export; ``known``:
    the release's item ids."""
    path = Path(export)
    try:
        tasks = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise MmcurateError(f"{path}: not a Label Studio JSON export ({str(exc).splitlines()[0]})") from None
    if not isinstance(tasks, list):
        raise MmcurateError(f"{path}: not a Label Studio JSON export (expected a list of tasks)")
    rows: dict[str, list[dict[str, Any]]] = {}
    seen: set[tuple[str, str]] = set()
    for task in tasks:
        data = task.get("data") or {}
        item = str(data.get("item_id") or "")
        where = f"{path}: task {task.get('id')}"
        if not item:
            raise MmcurateError(f"{where} has no item_id: not a task of an mmcurate export")
        if item not in known:
            raise MmcurateError(f"{where}: item_id {item!r} is not a sentence of this release's citations")
        documents = data.get("documents") or []
        for annotation in task.get("annotations") or []:
            if annotation.get("was_cancelled"):
                continue
            who = _annotator(annotation)
            if (who, item) in seen:
                raise MmcurateError(f"{where}: item {item!r} annotated twice by {who}")
            seen.add((who, item))
            result = annotation.get("result") or []
            support = [_choice(result, f"document_support_{i}", where) for i in range(len(documents))]
            rows.setdefault(who, []).append({
                "item_id": item, **{q: _choice(result, q, where) for q in QUESTIONS},
                "document_ids": [d["doc_id"] for d in documents if d["cited"]],
                "rejected_ids": [d["doc_id"] for d in documents if not d["cited"]],
                "document_support": support if all(support) else [], "annotator": who})
    return rows


def import_project(release: Path | str, exports: list[Path | str], out: Path | str) -> ImportResult:
    """Label Studio JSON exports -> ``import_labels`` (one JSONL file per annotator)."""
    if not exports:
        raise MmcurateError("give at least one Label Studio JSON export")
    known = {item["item_id"] for item in release_items(release)}
    per_annotator: dict[str, list[dict[str, Any]]] = {}
    for export in exports:
        for who, rows in labelled_rows(export, known).items():
            if who in per_annotator:
                raise MmcurateError(f"{export}: annotator {who!r} already given by another export")
            per_annotator[who] = rows
    with tempfile.TemporaryDirectory(prefix="mmcurate-label-studio-") as folder:
        files = []
        for index, (who, rows) in enumerate(sorted(per_annotator.items())):
            file = Path(folder) / f"annotator-{index}.jsonl"
            file.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
            files.append(file)
        return import_labels(release, files, out)


def push_project(out: Path | str, url: str, token: str, title: str = "mmcurate citation review",
                 wait: float = 900.0) -> int:
    """Create the exported project on a Label Studio through its REST API (the labeling config,
    the Local Files storage on ``out/images``, the tasks); returns the project id. Label Studio
    must serve local files with ``out`` as its document root; a server still starting (its
    first start migrates its database for minutes) is waited for, up to ``wait`` seconds."""
    import httpx

    out = Path(out)
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
        deadline = time.monotonic() + wait
        while True:
            try:
                if client.get("/api/projects").status_code < 500:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise MmcurateError(f"Label Studio at {url} did not answer within {wait:g} s")
            time.sleep(2.0)
        existing = [p for p in call("GET", "/api/projects", params={"title": title}).get("results", [])
                    if p.get("title") == title]
        if existing:  # pushed before (a second `make review-ui` on the same folder)
            return int(existing[0]["id"])
        project = call("POST", "/api/projects", json={"title": title, "label_config": (out / CONFIG).read_text()})
        call("POST", "/api/storages/localfiles", json={"project": project["id"], **project_storage(out)})
        call("POST", f"/api/projects/{project['id']}/import", json=json.loads((out / TASKS).read_text()))
    return int(project["id"])
