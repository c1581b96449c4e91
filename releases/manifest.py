"""manifest.json: what a release is, how it was made, and a checksum of every file in it.

Checksum policy. The manifest is the only source of truth for the sealed release: its
``files`` lists sha256 and size of every file written while the release was sealed (data,
ledger, quarantine, card, plots; not itself and not the post-seal files), and ``sealed``
is the sha256 of that list, so an edit of one entry shows. ``sealed_body`` holds the sha256
of every other top-level entry of the manifest (config, models, inputs, counts, statistics, notes,
the incomplete flag, ...) in canonical JSON (sorted keys, no spaces), so ``verify`` names
any entry edited, added or removed after sealing (manifest format 2; format 1 manifests,
written before, seal their files only and ``verify`` says so). Since format 3 the manifest's
JSON Schema (``manifest.schema.json``, from ``manifest_model.Manifest``) is a sealed file of
the release and ``verify`` checks the manifest against it; readers get the typed model from
``load_manifest``. A digest shows edits; it does
not prove who wrote the release: whoever needs that signs ``manifest.json`` itself. Files produced *after* sealing
(``quality/*`` by ``mmcurate validate``, ``report.html`` by ``mmcurate report``) are
listed in ``quality/checksums.json``, which every such command rewrites; that list may
name post-seal files only, and never a sealed one. ``verify`` checks both lists, reports
any file in neither, and checks the manifest's row counts against the shards.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mmcurate import __version__
from mmcurate.core.ids import sha256_file

from .draft import ReleaseDraft
from .errors import ReleaseError
from .manifest_model import MANIFEST_FORMAT, SCHEMA_FILE, Manifest, schema_text

MANIFEST = "manifest.json"
QUALITY_DIR = "quality"
ARTIFACT_CHECKSUMS = "quality/checksums.json"
VALIDATION_FILE = "quality/validation.json"  # written by releases.validation
REPORT = "report.html"
BODY_SEAL = "sealed_body"


# an absolute POSIX path inside a string (a path, or a spec such as ``nli:/models/x``); not a
# URL's ``//host`` and not the ``/`` inside a word such as ``colour/gradient``
ABSOLUTE_PATH = re.compile(r"(?<![\w.~/-])/(?!/)[^\s:;,'\"()\[\]{}<>|*]+")


def portable(value: Any, base: Path) -> Any:
    """JSON-able ``value`` with every absolute path in its strings rewritten relative to
    ``base``, the release folder: a release names no directory of the machine that built it,
    and whoever reads it resolves those paths against where the release is
    (``Settings.from_resolved``)."""
    if isinstance(value, dict):
        return {key: portable(item, base) for key, item in value.items()}
    if isinstance(value, list):
        return [portable(item, base) for item in value]
    if isinstance(value, str):
        return ABSOLUTE_PATH.sub(lambda match: os.path.relpath(match.group(0), base), value)
    return value


def code_version() -> dict[str, str]:
    """The git commit of the checkout this code runs from, or ``unknown`` outside git."""
    repo = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    return {"package": __version__, "git_commit": commit or "unknown"}


def file_entry(path: Path) -> dict[str, Any]:
    return {"sha256": sha256_file(path), "size": path.stat().st_size}


def source_file_entries(paths: list[str | dict[str, Any]]) -> list[dict[str, Any]]:
    """Hash each raw input file; an entry that is already a dict (a re-curation inheriting
    its parent's inputs, which may no longer be on this machine) is kept as recorded."""
    entries = []
    for name in paths:
        if isinstance(name, dict):
            entries.append(name)
            continue
        path = Path(name)
        if not path.is_file():
            raise ReleaseError(f"source file {name} recorded in the draft does not exist")
        entries.append({"path": str(path), **file_entry(path)})
    return entries


def _files(value: Any, at: str) -> dict[str, Path]:
    """Every absolute path string in ``value`` that names a file, by its field path."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _files(item, f"{at}.{key}" if at else str(key)).items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _files(item, f"{at}[{i}]").items()}
    if isinstance(value, str) and value.startswith("/") and Path(value).is_file():
        return {at: Path(value)}
    return {}


def input_digests(benchmark: str, config: dict[str, Any], models: list[dict[str, Any]]) -> dict[str, str]:
    """sha256 of every local file named by the parts of a resolved config that identify a
    release (the benchmark's section, the judge, the models by role), by config field path."""
    specs = config.get("models") or {}
    parts = {
        benchmark: config.get(benchmark) or {},
        "judge": config.get("judge"),
        "models": {m["name"]: specs.get(m["name"]) for m in models},
    }
    return {at: sha256_file(path) for at, path in sorted(_files(parts, "").items())}


def source_digests(entries: list[dict[str, Any]]) -> list[str]:
    """The sha256 of each raw source file, in a stable order (places are not identity)."""
    return sorted(str(entry.get("sha256")) for entry in entries)


def is_post_seal(relative: str) -> bool:
    """Files that commands may (re)write after the release is sealed."""
    return relative == REPORT or relative.startswith(QUALITY_DIR + "/")


def release_files(release_dir: Path) -> list[str]:
    """Every regular file below ``release_dir`` as a sorted POSIX path relative to it (symbolic
    links are no release's files: ``release_links``)."""
    return sorted(
        p.relative_to(release_dir).as_posix() for p in release_dir.rglob("*") if p.is_file() and not p.is_symlink()
    )


def release_links(release_dir: Path) -> dict[str, str]:
    """Every symbolic link below ``release_dir`` (to a file or a folder, never followed): its
    POSIX path relative to the release -> where it points. A release holds none: a link reaches
    outside what the checksums vouch for, so ``verify`` fails naming each."""
    links = {}
    for folder, dirs, files in os.walk(release_dir):  # os.walk does not descend into linked folders
        for name in [*dirs, *files]:
            path = Path(folder) / name
            if path.is_symlink():
                links[path.relative_to(release_dir).as_posix()] = os.readlink(path)
    return dict(sorted(links.items()))


def build_manifest(
    draft: ReleaseDraft, rows: dict[str, int], sizes: dict[str, int], shards: dict[str, list[str]], target: Path
) -> dict:
    """Everything but ``files``, which ``seal`` adds once all other files are written; paths
    relative to ``target``, the folder the release is published as."""
    return portable(
        {
            "format": MANIFEST_FORMAT,
            "benchmark": draft.benchmark,
            "pretty_name": draft.kind.pretty,
            "split": draft.kind.split,
            "version": draft.version,
            "parent": draft.parent,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "code_version": code_version(),
            "config": draft.config,
            "models": draft.models,
            "judge": draft.judge,
            "components": draft.components,
            "indexes": draft.indexes,
            "source_files": source_file_entries(draft.source_files),
            "inputs": input_digests(draft.benchmark, draft.config, draft.models),
            "counts": {**draft.counts, "rows": rows, "bytes": sizes},
            "statistics": draft.statistics,
            "removed": draft.removed,
            "seed": draft.seed,
            "k_min": draft.k_min,
            "notes": draft.notes,
            "incomplete": draft.incomplete,
            "shards": shards,
        },
        target.resolve(),
    )


def sealed_digest(files: Any) -> str:
    """sha256 of a JSON value (a ``files`` list, a manifest entry) in canonical JSON (sorted
    keys, no spaces)."""
    return hashlib.sha256(json.dumps(files, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def body_digests(manifest: dict) -> dict[str, str]:
    """The digest of every entry of the manifest's body: all but the file list and the seals."""
    return {key: sealed_digest(value) for key, value in manifest.items() if key not in ("files", "sealed", BODY_SEAL)}


def seal(release_dir: Path, manifest: dict) -> dict:
    """Write the manifest's JSON Schema, checksum every file written so far, seal the manifest's
    body and write manifest.json last."""
    (release_dir / SCHEMA_FILE).write_text(schema_text())
    files = {
        rel: file_entry(release_dir / rel)
        for rel in release_files(release_dir)
        if rel != MANIFEST and not is_post_seal(rel)
    }
    # as it will be read back (tuples as lists, paths and dates as text), so the digests match
    manifest = json.loads(
        json.dumps({**manifest, "files": files, "sealed": sealed_digest(files)}, ensure_ascii=False, default=str)
    )
    manifest[BODY_SEAL] = body_digests(manifest)
    write_json(release_dir / MANIFEST, manifest)
    return manifest


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # keys in the order they were built, so tables read naturally (stage before count)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def _read_json(path: Path) -> Any:
    """The JSON document in ``path``; ReleaseError (one line) when it is not valid JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReleaseError(f"{path} is not valid JSON: {exc}") from None


def manifest_json(release_dir: Path) -> dict[str, Any]:
    """``manifest.json`` as written (what its seals are over); ReleaseError (one line) when it is
    missing or not a JSON object. Readers use ``load_manifest``."""
    path = release_dir / MANIFEST
    if not path.is_file():
        raise ReleaseError(f"{release_dir} is not a release: no {MANIFEST}")
    manifest = _read_json(path)
    if not isinstance(manifest, dict):
        raise ReleaseError(f"{path} is not a release manifest: a JSON object is expected")
    return manifest


def typed_manifest(path: Path, manifest: dict[str, Any]) -> Manifest:
    """``manifest`` (read from ``path``) as the typed model; ReleaseError (one line) naming the
    first entry that is missing or of the wrong type."""
    try:
        return Manifest.model_validate(manifest)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "(top)"
        raise ReleaseError(
            f"{path} is not a release manifest: {where}: {first['msg'].lower()} "
            f"({exc.error_count()} problem{'s' if exc.error_count() > 1 else ''})"
        ) from None


def load_manifest(release_dir: Path) -> Manifest:
    """The manifest of ``release_dir``, typed (any format); ReleaseError (one line) when it is
    missing, not JSON, or lacks what every release manifest holds."""
    return typed_manifest(release_dir / MANIFEST, manifest_json(release_dir))


def post_seal_entries(release_dir: Path) -> dict[str, dict[str, Any]]:
    """The recorded post-seal list (``quality/checksums.json``), or {} when there is none."""
    path = release_dir / ARTIFACT_CHECKSUMS
    if not path.is_file():
        return {}
    entries = _read_json(path)
    if not isinstance(entries, dict):
        raise ReleaseError(f"{path} must map file paths to checksums")
    return entries


def record_artifacts(release_dir: Path) -> dict[str, dict[str, Any]]:
    """Rewrite ``quality/checksums.json`` over all post-seal files that exist now."""
    entries = {
        rel: file_entry(release_dir / rel)
        for rel in release_files(release_dir)
        if is_post_seal(rel) and rel != ARTIFACT_CHECKSUMS
    }
    write_json(release_dir / ARTIFACT_CHECKSUMS, entries)
    return entries


def recorded_validation(path: Path | str) -> dict | None:
    """The stored validation results of a release, or None when it was never validated."""
    file = Path(path) / VALIDATION_FILE
    return json.loads(file.read_text()) if file.is_file() else None
