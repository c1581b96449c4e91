"""Recompute every checksum of a release and check its counts (see manifest.py for what is
pinned where).

The manifest's ``files`` decide the sealed files; ``quality/checksums.json`` can only add
post-seal files (validation results, Data Docs, the report) and never speaks for a sealed
one. Every file in the folder must be in one of the two lists, and the folder holds no
symbolic link (to a file or a folder: it would reach past what the checksums vouch for); the manifest's own body must
match its seal (every entry named when it was edited, added or removed); each config's row
count in the manifest must be what its shards hold, and the released samples it counts per
source (``counts.per_source``) what the data holds per source. A re-curated release's parent, when its
version is beside it, must have the content id the release records. A manifest of format 3 or
later must validate against the JSON Schema sealed beside it (``manifest.schema.json``).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import pyarrow.parquet as pq

from mmcurate.core.plural import counted

from .errors import ReleaseError
from .manifest import (
    ARTIFACT_CHECKSUMS,
    BODY_SEAL,
    MANIFEST,
    body_digests,
    file_entry,
    is_post_seal,
    load_manifest,
    manifest_json,
    post_seal_entries,
    release_files,
    release_links,
    sealed_digest,
    typed_manifest,
)
from .manifest_model import SCHEMA_FILE, Counts, Manifest


@dataclass
class VerifyResult:
    mismatched: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)  # the manifest or the post-seal list contradicts itself
    checked: int = 0
    notes: list[str] = field(default_factory=list)  # true, and worth saying (e.g. an older manifest format)

    @property
    def ok(self) -> bool:
        return not (self.mismatched or self.missing or self.extra or self.invalid)

    def problems(self) -> list[str]:
        return (
            self.invalid
            + [f"checksum mismatch: {p}" for p in self.mismatched]
            + [f"missing: {p}" for p in self.missing]
            + [f"not in manifest: {p}" for p in self.extra]
        )


def _check_entries(release_dir: Path, entries: dict[str, dict], present: set[str], result: VerifyResult) -> None:
    for rel, entry in sorted(entries.items()):
        if rel not in present:
            result.missing.append(rel)
            continue
        result.checked += 1
        actual = file_entry(release_dir / rel)
        if not isinstance(entry, dict) or (actual["size"], actual["sha256"]) != (
            entry.get("size"),
            entry.get("sha256"),
        ):
            result.mismatched.append(rel)


def _check_counts(release_dir: Path, manifest: Manifest, result: VerifyResult) -> None:
    rows, sealed = manifest.counts.rows, manifest.files
    for config, shards in sorted(manifest.shards.items()):
        total = 0
        for rel in shards:
            if rel not in sealed:
                result.invalid.append(f"shard {rel} of config {config} is not a sealed file")
                continue
            try:
                total += pq.ParquetFile(release_dir / rel).metadata.num_rows
            except (OSError, ValueError) as exc:  # missing or not Parquet: reported once, here
                result.invalid.append(f"shard {rel} is unreadable: {str(exc).splitlines()[0]}")
                return
        if rows.get(config) != total:
            result.invalid.append(
                f"config {config}: the manifest counts {counted(rows.get(config) or 0, 'row')}, its shards hold {total}"
            )


def _check_body(raw: dict[str, Any], manifest: Manifest, result: VerifyResult) -> None:
    """The manifest's body as written (``raw``) against its seal, naming every entry that changed."""
    recorded = manifest.sealed_body
    if manifest.format < 2 and recorded is None:
        result.notes.append(
            f"{MANIFEST} is format {manifest.format}: its files are sealed, its own "
            "entries (config, counts, notes, ...) are not"
        )
        return
    if recorded is None:
        result.invalid.append(f"{MANIFEST}: no {BODY_SEAL} for its own entries")
        return
    now = body_digests(raw)
    edited = sorted(key for key in recorded.keys() & now.keys() if recorded[key] != now[key])
    added, removed = sorted(now.keys() - recorded.keys()), sorted(recorded.keys() - now.keys())
    for what, keys in (("edited", edited), ("added", added), ("removed", removed)):
        if keys:
            result.invalid.append(f"{MANIFEST}: {', '.join(keys)} {what} after sealing")


def _check_schema(
    raw: dict[str, Any], manifest: Manifest, present: set[str], release_dir: Path, result: VerifyResult
) -> None:
    """Since format 3: the manifest as written against the JSON Schema sealed beside it."""
    if manifest.format < 3:
        result.notes.append(
            f"{MANIFEST} is format {manifest.format}: written before releases carried the "
            f"manifest's schema ({SCHEMA_FILE})"
        )
        return
    if SCHEMA_FILE not in manifest.files or SCHEMA_FILE not in present:
        result.invalid.append(f"{MANIFEST} is format {manifest.format}: its schema {SCHEMA_FILE} is not a sealed file")
        return
    try:
        schema = json.loads((release_dir / SCHEMA_FILE).read_text(encoding="utf-8"))
        jsonschema.Draft202012Validator(schema).validate(raw)
    except (ValueError, jsonschema.SchemaError) as exc:
        result.invalid.append(f"{SCHEMA_FILE} is not a JSON Schema: {str(exc).splitlines()[0]}")
    except jsonschema.ValidationError as exc:
        where = ".".join(map(str, exc.absolute_path)) or "(top)"
        result.invalid.append(f"{MANIFEST} does not follow {SCHEMA_FILE}: {where}: {exc.message}")


def _released_per_source(counts: Counts) -> dict[str, int] | None:
    """The released samples ``counts.per_source`` states per source (a number, or a
    ``released`` / ``retained`` entry), or None when it states none."""
    stated = {}
    for source, value in counts.per_source.items():
        if isinstance(value, dict):
            value = value.get("released", value.get("retained"))
        if isinstance(value, int) and not isinstance(value, bool):
            stated[source] = value
    return stated or None


def _check_per_source(release_dir: Path, manifest: Manifest, result: VerifyResult) -> None:
    """``counts.per_source`` against the sources of the released rows."""
    stated = _released_per_source(manifest.counts)
    if stated is None or not manifest.shards:
        return
    config = next(iter(manifest.shards))  # the first config holds one row per sample (ReleaseKind)
    held: Counter[str] = Counter()
    for rel in manifest.shards[config]:
        try:
            handle = pq.ParquetFile(release_dir / rel)
            if "source" not in handle.schema_arrow.names:
                return  # a single-source release (RefLVQA): its rows are the rows count
            held.update(handle.read(columns=["source"]).column("source").to_pylist())
        except (OSError, ValueError):
            return  # unreadable shards are reported by the row count check
    for source in sorted(set(stated) | set(held)):
        if stated.get(source, 0) != held.get(source, 0):
            result.invalid.append(
                f"counts.per_source: the manifest counts {stated.get(source, 0)} released {source} "
                f"samples, the data holds {held.get(source, 0)}"
            )


def _check_parent(release_dir: Path, manifest: Manifest, result: VerifyResult) -> None:
    """A re-curated release records its parent's content id: the release of that version beside
    it must be that one (a re-curation is written beside its parent)."""
    parent = manifest.parent
    if parent is None or isinstance(parent, str):
        return
    sibling = release_dir.parent / parent.version
    if (sibling / MANIFEST).is_file():
        there = load_manifest(sibling).sealed
        if there != parent.content_id:
            result.invalid.append(
                f"parent {parent.version} beside it has content id {str(there)[:16]}, "
                f"not {str(parent.content_id)[:16]} it was made from"
            )


def verify_release(path: Path | str) -> VerifyResult:
    release_dir = Path(path)
    raw = manifest_json(release_dir)  # the seals are over the manifest as written
    manifest = typed_manifest(release_dir / MANIFEST, raw)
    sealed: dict[str, dict] = raw["files"]
    result = VerifyResult()
    if not sealed:
        result.invalid.append("the manifest lists no files")
        return result
    if manifest.sealed != sealed_digest(sealed):
        result.invalid.append("the manifest's file list does not match its sealed digest")
    try:
        later = post_seal_entries(release_dir)
    except ReleaseError as exc:  # a damaged list is a verification failure, not a usage error
        result.invalid.append(str(exc))
        later = {}
    for rel in sorted(later):
        if rel in sealed:
            result.invalid.append(f"{ARTIFACT_CHECKSUMS} lists sealed file {rel}; only the manifest pins it")
        elif not is_post_seal(rel):
            result.invalid.append(f"{ARTIFACT_CHECKSUMS} lists {rel}, which is not a post-seal file")
    later = {rel: entry for rel, entry in later.items() if rel not in sealed and is_post_seal(rel)}
    result.invalid += [
        f"symbolic link {rel} -> {target}: a release holds no links"
        for rel, target in release_links(release_dir).items()
    ]
    present = set(release_files(release_dir)) - {MANIFEST, ARTIFACT_CHECKSUMS}
    result.extra = sorted(present - set(sealed) - set(later))
    _check_entries(release_dir, sealed, present, result)
    _check_entries(release_dir, later, present, result)
    _check_body(raw, manifest, result)
    _check_schema(raw, manifest, present, release_dir, result)
    _check_counts(release_dir, manifest, result)
    _check_per_source(release_dir, manifest, result)
    _check_parent(release_dir, manifest, result)
    return result
