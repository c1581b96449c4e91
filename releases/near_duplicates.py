"""Near-duplicates and leakage of a release (``annotation.dedup``): the stage a flow runs last,
with the references the config names, and what the quality report lists.

References: the benchmark's earlier versions under ``releases_root`` (``dedup.earlier_versions``)
and every release folder in ``dedup.against`` (another benchmark, a training set checked for
contamination), whichever benchmark it is: each is read from its samples config (question and
images). A folder in ``against`` that is not a release is refused before the run starts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from mmcurate.annotation.dedup import STAGE, NearDuplicates, Reference, items
from mmcurate.core.config import Settings
from mmcurate.core.errors import ConfigError
from mmcurate.core.plural import counted
from mmcurate.core.stages import StageResult

from .errors import ReleaseError
from .reader import Release, list_versions, open_release
from .versions import parse_version


def release_reference(path: Path) -> Reference:
    """The questions and images of a release folder's samples config (any benchmark)."""
    release = open_release(path)

    def chunks() -> Iterator[tuple[pa.Array, pa.Array, list[list[bytes]]]]:
        for batch in release.batches(release.samples_config):
            names = batch.schema.names
            column = "images" if "images" in names else "image" if "image" in names else None
            values = batch.column(column).to_pylist() if column else [None] * batch.num_rows
            images = [
                [
                    i["bytes"]
                    for i in (v if isinstance(v, list) else [v] if v else [])
                    if isinstance(i, dict) and i.get("bytes")
                ]
                for v in values
            ]
            yield batch.column("sample_id"), batch.column("question"), images

    return Reference(f"{release.benchmark} {release.version}", items(chunks()))


def near_duplicate_stage(
    settings: Settings, benchmark: str, version: str, folder: Path | None = None
) -> NearDuplicates:
    """The check of a ``benchmark`` release ``version`` against its references (refused when one
    named in the config is not a release); ``folder``: where the benchmark's versions are, when
    not ``releases_root/<benchmark>`` (a re-curation's, beside its parent)."""
    config = settings.dedup
    folders: list[Path] = []
    if config.earlier_versions:
        root = folder if folder is not None else settings.releases_root / benchmark
        folders += [
            root / v for v in list_versions(root.parent, root.name) if parse_version(v) < parse_version(version)
        ]
    for path in config.against:
        try:
            open_release(path)
        except ReleaseError as exc:
            raise ConfigError(f"dedup.against: {exc}") from None
        folders.append(path)
    return NearDuplicates(config, [release_reference(folder) for folder in folders])


def flagged_rows(release: Release) -> list[dict]:
    """The near-duplicate flags of the run that made the release (its ledger may hold its
    parent's too): sample, kind, the other sample, where."""
    ledger = release.ledger
    run_id = release.manifest.counts.run_id
    rows = ledger.filter(
        pc.and_(pc.equal(ledger["stage"], STAGE), pc.equal(ledger["run_id"], run_id or ""))
    ).to_pylist()
    ours = set(release.sample_ids)
    out = []
    for row in rows:
        detail = json.loads(row["detail"] or "{}")
        out.append(
            {
                "sample_id": row["sample_id"],
                "kind": detail.get("kind"),
                "verdict": row["verdict"],
                "of": detail.get("of"),
                "in": detail.get("in"),
                "in_release": row["sample_id"] in ours,
                "image_distance": detail.get("image_distance"),
                "question_jaccard": detail.get("question_jaccard"),
            }
        )
    return out


def near_duplicate_note(result: StageResult) -> str:
    """One line for the card: what was checked, with which settings, and what was found."""
    extra, counts = result.extra, result.counts
    against = ", ".join(["this release", *extra.get("references", [])])
    found = f"{counted(counts.get('flagged', 0), 'sample')} flagged" + (
        f", {counts['dropped']} dropped" if counts.get("dropped") else ""
    )
    return (
        f"Near-duplicates ({result.components.get('near_duplicates')}; question and image both: "
        f"{'dropped' if extra['settings'].get('drop') else 'flagged only'}) checked against {against}: {found} "
        "(table near_duplicates; the flags are `dedup` rows of the ledger)."
    )


def near_duplicates(stages: list[StageResult], notes: list[str]) -> dict[str, list[dict]]:
    """The ``near_duplicates`` statistics of a run whose stages end with the check (if it ran),
    its note appended to ``notes``."""
    if not stages or stages[-1].stage != STAGE:
        return {}
    notes.append(near_duplicate_note(stages[-1]))
    return {"near_duplicates": stages[-1].extra["near_duplicates"]}
