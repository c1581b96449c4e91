"""What changed between two releases: samples added, removed (and why each was dropped) and
changed (in both, with other content: a distractor removed, a citation dropped, a chain
collapsed; and why, from the new release's ledger)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from mmcurate.core.ledger import Ledger

from .draft import ReleaseDraft
from .errors import ReleaseError
from .reader import LEDGER_FILE, Release, open_release
from .rerun import comparable

NOT_IN_LEDGER = "not in NEW's ledger"


CHANGE_VERDICTS = ("changed", "remove", "collapse")  # decisions that alter a sample that stays


@dataclass
class Removal:
    sample_id: str
    reason: str
    removed_in: str
    model: str | None = None  # the model whose answer dropped it, when one did
    source: str | None = None


@dataclass
class Change:
    sample_id: str
    reason: str
    models: list[str] = field(default_factory=list)
    source: str | None = None
    fields: list[str] = field(default_factory=list)  # the sample's fields whose content differs
    stages: list[str] = field(default_factory=list)  # the stages whose decisions changed it

    def line(self) -> str:
        """``~ <id>: negative_contexts (changed by oracle); oracle/...: remove by m in v1.1.0 (...)``."""
        by = f" (changed by {', '.join(self.stages)})" if self.stages else ""
        return f"~ {self.sample_id}: {', '.join(self.fields) or 'content'}{by}; {self.reason}"


@dataclass
class ReleaseDiff:
    old_version: str
    new_version: str
    added: list[str] = field(default_factory=list)
    removed: list[Removal] = field(default_factory=list)
    changed: list[Change] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # sample_id -> source, over both sides

    def removed_records(self) -> list[dict]:
        """The shape of ``ReleaseDraft.removed``."""
        return [{"sample_id": r.sample_id, "reason": r.reason, "removed_in": r.removed_in} for r in self.removed]


def drop_reason(decision: dict, version: str) -> str:
    """One line such as ``gating/parametric_answer: drop by qwen-vl in v1.1.0 (answered correctly)``;
    the model named is the one whose answer decided (``deciding_model``), with the row's model
    (a grader, ``lexical``) beside it when that is another."""
    text = f"{decision['stage']}/{decision['check']}: {decision['verdict']}"
    decider = deciding_model(decision)
    if decider:
        text += f" by {decider}"
        if decision.get("model") and decision["model"] != decider:
            text += f" (graded by {decision['model']})"
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


def deciding_model(decision: dict) -> str | None:
    """The model whose answer made a decision: the detail's ``deciding_model`` (a sample-level
    verdict names it there), else the row's ``model``."""
    try:
        detail = json.loads(decision.get("detail") or "{}")
    except json.JSONDecodeError:
        detail = {}
    return (detail.get("deciding_model") if isinstance(detail, dict) else None) or decision.get("model")


def run_changes(ledger: Ledger, run_id: str) -> dict[str, list[dict]]:
    """Decisions of run ``run_id`` that altered a sample it kept (``CHANGE_VERDICTS``), per sample."""
    out: dict[str, list[dict]] = {}
    for batch in ledger.batches():
        mask = pc.and_(
            pc.equal(batch.column("run_id"), run_id),
            pc.is_in(batch.column("verdict"), value_set=pa.array(CHANGE_VERDICTS)),
        )
        for row in batch.filter(mask).to_pylist():
            out.setdefault(row["sample_id"], []).append(row)
    return out


@dataclass
class _Side:
    benchmark: str
    version: str
    rows: dict[str, dict]  # sample_id -> row as compared (``rerun.comparable``), in release order
    ledger: Ledger
    run_id: str | None


def _side(release: Release | ReleaseDraft | Path | str) -> _Side:
    if isinstance(release, (str, Path)):
        release = open_release(release)
    if isinstance(release, ReleaseDraft):
        table = release.tables[release.kind.samples_config]
        return _Side(release.benchmark, release.version, _rows(table), release.ledger, release.counts.get("run_id"))
    return _Side(
        release.benchmark,
        release.version,
        _rows(release.table(release.samples_config)),
        Ledger([release.path / LEDGER_FILE]),
        release.manifest.counts.run_id,
    )


def _rows(table: pa.Table) -> dict[str, dict]:
    return {row["sample_id"]: comparable(row) for row in table.to_pylist()}


def diff_releases(old: Release | Path | str, new: Release | ReleaseDraft | Path | str) -> ReleaseDiff:
    """Added, removed and changed samples. ``new`` may be a draft, so a re-curation can fill
    ``removed`` and its changelog before it is written."""
    a, b = _side(old), _side(new)
    if a.benchmark != b.benchmark:
        raise ReleaseError(
            f"cannot diff {a.benchmark} {a.version} against {b.benchmark} {b.version}: "
            "releases of different benchmarks share no samples"
        )
    drops = latest_drops(b.ledger)
    changes = run_changes(b.ledger, b.run_id) if b.run_id else {}
    sources = {sid: str(source) for side in (a, b) for sid, row in side.rows.items() if (source := row.get("source"))}
    removed = [
        Removal(
            sid,
            drop_reason(drops[sid], b.version) if sid in drops else NOT_IN_LEDGER,
            b.version,
            deciding_model(drops[sid]) if sid in drops else None,
            sources.get(sid),
        )
        for sid in a.rows
        if sid not in b.rows
    ]
    changed = []
    for sid, row in b.rows.items():
        if sid in a.rows and a.rows[sid] != row:
            why = changes.get(sid, [])
            reason = (
                "; ".join(drop_reason(d, b.version) for d in why) or "other content (no decision of this run says why)"
            )
            fields = [k for k in dict.fromkeys([*a.rows[sid], *row]) if a.rows[sid].get(k) != row.get(k)]
            changed.append(
                Change(
                    sid,
                    reason,
                    sorted({m for d in why if (m := deciding_model(d))}),
                    sources.get(sid),
                    fields,
                    list(dict.fromkeys(d["stage"] for d in why)),
                )
            )
    return ReleaseDiff(a.version, b.version, [sid for sid in b.rows if sid not in a.rows], removed, changed, sources)
