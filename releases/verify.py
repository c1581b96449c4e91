"""Recompute every checksum of a release (see manifest.py for what is pinned where)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .manifest import ARTIFACT_CHECKSUMS, MANIFEST, file_entry, load_manifest, release_files


@dataclass
class VerifyResult:
    mismatched: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    checked: int = 0

    @property
    def ok(self) -> bool:
        return not (self.mismatched or self.missing or self.extra)

    def problems(self) -> list[str]:
        return (
            [f"checksum mismatch: {p}" for p in self.mismatched]
            + [f"missing: {p}" for p in self.missing]
            + [f"not in manifest: {p}" for p in self.extra]
        )


def verify_release(path: Path | str) -> VerifyResult:
    release_dir = Path(path)
    expected: dict[str, dict] = dict(load_manifest(release_dir)["files"])
    artifacts = release_dir / ARTIFACT_CHECKSUMS
    if artifacts.is_file():
        expected.update(json.loads(artifacts.read_text()))
    present = set(release_files(release_dir)) - {MANIFEST, ARTIFACT_CHECKSUMS}
    result = VerifyResult(extra=sorted(present - set(expected)))
    for rel, entry in sorted(expected.items()):
        if rel not in present:
            result.missing.append(rel)
            continue
        result.checked += 1
        actual = file_entry(release_dir / rel)
        if actual["size"] != entry["size"] or actual["sha256"] != entry["sha256"]:
            result.mismatched.append(rel)
    return result
