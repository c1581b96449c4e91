"""What changed between two releases, and why each removed sample was dropped."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.compute as pc

from mmcurate.core.ledger import Ledger

from .draft import ReleaseDraft
from .errors import ReleaseError
from .reader import LEDGER_FILE, Release, open_release

NOT_IN_LEDGER = "not in NEW's ledger"


@dataclass
class Removal:
    sample_id: str
    reason: str
    removed_in: str


@dataclass
class ReleaseDiff:
    old_version: str
    new_version: str
    added: list[str] = field(default_factory=list)
    removed: list[Removal] = field(default_factory=list)

    def removed_records(self) -> list[dict]:
        """The shape of ``ReleaseDraft.removed``."""
        return [{"sample_id": r.sample_id, "reason": r.reason, "removed_in": r.removed_in} for r in self.removed]


def drop_reason(decision: dict, version: str) -> str:
    """One line such as ``gating/parametric_answer: drop by qwen-vl in v1.1.0 (answered correctly)``."""
    text = f"{decision['stage']}/{decision['check']}: {decision['verdict']}"
    if decision.get("model"):
        text += f" by {decision['model']}"
    if decision.get("context_id"):
        text += f" on context {decision['context_id']}"
    text += f" in v{version}"
    try:
        detail = json.loads(decision.get("detail") or "{}")
    except json.JSONDecodeError:
        detail = {}
    if isinstance(detail, dict) and detail.get("reason"):
        text += f" ({detail['reason']})"
    return text


def latest_drops(ledger: Ledger) -> dict[str, dict]:
    """The last ``drop`` decision recorded for each sample."""
    latest: dict[str, dict] = {}
    for batch in ledger.batches():
        for row in batch.filter(pc.equal(batch.column("verdict"), "drop")).to_pylist():
            latest[row["sample_id"]] = row
    return latest


def _side(release: Release | ReleaseDraft | Path | str) -> tuple[str, str, list[str], Ledger]:
    if isinstance(release, (str, Path)):
        release = open_release(release)
    if isinstance(release, ReleaseDraft):
        ids = release.tables[release.kind.samples_config].column("sample_id").to_pylist()
        return release.benchmark, release.version, ids, release.ledger
    return release.benchmark, release.version, release.sample_ids, Ledger([release.path / LEDGER_FILE])


def diff_releases(old: Release | Path | str, new: Release | ReleaseDraft | Path | str) -> ReleaseDiff:
    """Added and removed samples. ``new`` may be a draft, so a re-curation can fill ``removed``."""
    old_benchmark, old_version, old_ids, _ = _side(old)
    new_benchmark, new_version, new_ids, new_ledger = _side(new)
    if old_benchmark != new_benchmark:
        raise ReleaseError(f"cannot diff {old_benchmark} {old_version} against {new_benchmark} {new_version}: "
                           "releases of different benchmarks share no samples")
    new_set, old_set = set(new_ids), set(old_ids)
    drops = latest_drops(new_ledger)
    removed = [
        Removal(sid, drop_reason(drops[sid], new_version) if sid in drops else NOT_IN_LEDGER, new_version)
        for sid in old_ids
        if sid not in new_set
    ]
    return ReleaseDiff(old_version, new_version, [s for s in new_ids if s not in old_set], removed)

