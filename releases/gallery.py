"""Samples a reader of the report can look at: a few kept and a few removed per stage, and the
near-duplicate pairs side by side, each with its thumbnail, question, answer and the ledger's
reason (the line ``mmcurate why`` prints for the deciding row).

Draws are seeded by the release's content id and the stage, so the same release always shows
the same samples. A kept sample's content is in the release; a removed one's is not (a release
holds what it released), so it is looked up, in this order, in the benchmark's other versions
beside the release and in the run's ingest under the workdir the release records; where none
of them holds it the item says so and shows the ledger's record alone.
"""

from __future__ import annotations

import base64
import io
import json
import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from PIL import Image

from mmcurate.core.images import ImageStore

from .diff import drop_reason
from .near_duplicates import flagged_rows
from .reader import Release, list_versions, open_release

PER_STAGE = 3  # kept and removed samples shown per stage
THUMBNAIL = 160  # pixels, the longer side
MAX_PAIRS = 12  # near-duplicate pairs shown
VERDICTS = ("keep", "drop")
NOT_HELD = "not held by this release, the benchmark's other versions or the recorded workdir"


@dataclass(frozen=True)
class Shown:
    """A sample as the report shows it."""

    sample_id: str
    question: str | None = None
    answer: str | None = None
    source: str | None = None
    thumbnail: str | None = None  # base64 JPEG
    found_in: str | None = None  # where its content was read; None: nowhere (NOT_HELD)


@dataclass(frozen=True)
class GalleryItem:
    shown: Shown
    fate: str  # "kept" or "removed"
    reason: str


def thumbnail(data: bytes | None) -> str | None:
    """A JPEG of at most THUMBNAIL pixels a side, base64; None for no or undecodable bytes."""
    if not data:
        return None
    try:
        with Image.open(io.BytesIO(data)) as opened:
            img = opened.convert("RGB")
            img.thumbnail((THUMBNAIL, THUMBNAIL))
            out = io.BytesIO()
            img.save(out, format="JPEG", quality=80)
    except (OSError, ValueError, Image.DecompressionBombError):
        return None
    return base64.b64encode(out.getvalue()).decode("ascii")


def _first_bytes(value: Any) -> bytes | None:
    """The bytes of the first image of a row's image column (a list of {bytes, path} or one)."""
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, dict) and item.get("bytes"):
            return item["bytes"]
    return None


def _context_bytes(contexts: Any) -> bytes | None:
    for context in contexts or []:
        if isinstance(context, dict) and isinstance(context.get("image"), dict) and context["image"].get("bytes"):
            return context["image"]["bytes"]
    return None


def _answer(row: dict) -> str | None:
    value = row.get("answers", row.get("answer"))
    if isinstance(value, list):
        return " | ".join(str(v) for v in value[:3]) or None
    return None if value is None else str(value)


def _from_release(release: Release, ids: set[str]) -> dict[str, Shown]:
    if not ids:
        return {}
    paths = release.shard_paths(release.samples_config)
    names = set(pq.read_schema(paths[0]).names) if paths else set()
    columns = [
        c
        for c in ("sample_id", "source", "question", "query", "answers", "answer", "images", "image", "gold_contexts")
        if c in names
    ]
    table = ds.dataset([str(p) for p in paths], format="parquet").to_table(
        columns=columns, filter=pc.field("sample_id").isin(sorted(ids))
    )  # only the rows shown are read whole
    where = f"{release.benchmark} {release.version}"
    out = {}
    for row in table.to_pylist():
        image = _first_bytes(row.get("images", row.get("image"))) or _context_bytes(row.get("gold_contexts"))
        question = row.get("question", row.get("query"))
        out[row["sample_id"]] = Shown(
            row["sample_id"], question, _answer(row), row.get("source"), thumbnail(image), where
        )
    return out


def _from_ingest(workdir: Path, ids: set[str]) -> dict[str, Shown]:
    """Canonical samples of the run's ingests (images by sha256 in the workdir's image store)."""
    store = ImageStore(workdir / "images")
    out = {}
    for part in sorted((workdir / "ingest").glob("*/samples.parquet")):
        table = pq.read_table(
            part,
            columns=["sample_id", "source", "question", "answers", "images", "gold_contexts"],
            filters=pc.field("sample_id").isin(sorted(ids)),
        )
        for row in table.to_pylist():
            shas = [*(row["images"] or []), *(c["image"] for c in row["gold_contexts"] or [] if c.get("image"))]
            path = next((p for sha in shas if (p := store.find(sha)) is not None), None)
            out[row["sample_id"]] = Shown(
                row["sample_id"],
                row["question"],
                _answer(row),
                row["source"],
                thumbnail(path.read_bytes() if path else None),
                "the run's ingest (workdir)",
            )
    return out


def lookup(release: Release, ids: Iterable[str]) -> dict[str, Shown]:
    """Each sample's content, from the first place that holds it (see the module docstring)."""
    wanted = set(ids)
    if not wanted:
        return {}
    found = _from_release(release, wanted)
    for version in reversed(list_versions(release.path.parent.parent, release.path.parent.name)):
        if wanted <= found.keys():
            break
        if version != release.version:
            other = release.path.parent / version
            found = {**_from_release(open_release(other), wanted - found.keys()), **found}
    recorded = release.manifest.config.get("workdir")
    workdir = (release.path / recorded).resolve() if recorded else None
    if workdir is not None and not wanted <= found.keys() and (workdir / "ingest").is_dir():
        found = {**_from_ingest(workdir, wanted - found.keys()), **found}
    return {sid: found.get(sid, Shown(sid)) for sid in wanted}


def _decisions(release: Release) -> dict[str, dict[str, list[dict]]]:
    """Per stage, per verdict (keep, drop): the sample-level rows of the run that made the release."""
    ledger = release.ledger
    rows = ledger.filter(
        pc.and_(
            pc.equal(ledger["run_id"], release.manifest.counts.run_id or ""),
            pc.is_in(ledger["verdict"], value_set=pa.array(VERDICTS)),
        )
    ).to_pylist()
    out: dict[str, dict[str, list[dict]]] = {}
    for row in rows:
        out.setdefault(row["stage"], {}).setdefault(row["verdict"], []).append(row)
    return out


def gallery(release: Release, per_stage: int = PER_STAGE) -> dict[str, list[GalleryItem]]:
    """Per stage (ledger order), up to ``per_stage`` kept and ``per_stage`` removed samples,
    drawn with a seed of the release's content id and the stage."""
    released = set(release.sample_ids)
    picked: dict[str, list[tuple[dict, str]]] = {}
    for stage, verdicts in _decisions(release).items():
        rng = random.Random(f"{release.content_id}:{stage}")
        keeps = {r["sample_id"]: r for r in verdicts.get("keep", []) if r["sample_id"] in released}
        drops = {r["sample_id"]: r for r in verdicts.get("drop", []) if r["sample_id"] not in released}
        chosen = [(keeps[s], "kept") for s in rng.sample(sorted(keeps), min(per_stage, len(keeps)))]
        chosen += [(drops[s], "removed") for s in rng.sample(sorted(drops), min(per_stage, len(drops)))]
        if chosen:
            picked[stage] = chosen
    shown = lookup(release, {row["sample_id"] for rows in picked.values() for row, _ in rows})
    return {
        stage: [GalleryItem(shown[row["sample_id"]], fate, drop_reason(row, release.version)) for row, fate in rows]
        for stage, rows in picked.items()
    }


@dataclass(frozen=True)
class Pair:
    flagged: Shown
    other: Shown
    other_in: str
    kind: str
    scores: str
    verdict: str


def _scores(row: dict) -> str:
    parts = []
    if row.get("question_jaccard") is not None:
        parts.append(f"question Jaccard {row['question_jaccard']}")
    if row.get("image_distance") is not None:
        parts.append(f"image hash distance {row['image_distance']}")
    return ", ".join(parts)


def _reference(release: Release, where: str | None) -> Release | None:
    """The release a flag's ``in`` names: this one, or another version of this benchmark beside it."""
    if where in (None, "this release"):
        return release
    name, _, version = str(where).rpartition(" ")
    folder = release.path.parent / version
    if name == release.benchmark and (folder / "manifest.json").is_file():
        return open_release(folder)
    return None


def near_duplicate_pairs(release: Release, limit: int = MAX_PAIRS) -> list[Pair]:
    """The first ``limit`` near-duplicate flags of the release's run, both samples shown."""
    rows = flagged_rows(release)[:limit]
    mine = lookup(release, {r["sample_id"] for r in rows})
    pairs = []
    for row in rows:
        reference = _reference(release, row["in"])
        other = (
            lookup(reference, {row["of"]})[row["of"]] if reference is not None and row["of"] else Shown(str(row["of"]))
        )
        pairs.append(
            Pair(mine[row["sample_id"]], other, str(row["in"]), str(row["kind"]), _scores(row), row["verdict"])
        )
    return pairs


def reason_counts(release: Release) -> dict[str, int]:
    """Samples removed by the release's run, per reason (the drop's ``reason``, else stage/check)."""
    counts: dict[str, int] = {}
    for rows in _decisions(release).values():
        for row in rows.get("drop", []):
            detail = json.loads(row["detail"] or "{}")
            reason = f"{row['stage']}: {detail.get('reason') or row['check']}"
            counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
