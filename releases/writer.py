"""Write a release atomically: build it in a hidden temp dir, validate it, rename it into place.

A version directory appears only complete and validated; a crash or a failed suite leaves
at most a ``.tmp-<version>-<random>`` directory, which readers never list (and which is
removed whenever the writer itself fails). A writer holds its staging folder under an
exclusive lock (``flock`` on the folder) while it lives; the kernel drops the lock when the
process dies, ``kill -9`` included, so the next write into the benchmark's folder removes the
staging folders no writer holds any more and says so (a warning naming them), and never one
a live writer is filling.
"""

from __future__ import annotations

import fcntl
import logging
import math
import os
import secrets
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Features

from mmcurate.core.images import ImageStore
from mmcurate.core.plural import counted
from mmcurate.core.tables import SpilledTable, table_chunks, write_table

from .card import render_card
from .changelog import CHANGELOG
from .draft import ReleaseDraft
from .embed_images import embed_images, hf_features, with_hf_metadata
from .errors import ReleaseError, ReleaseExists, ReleaseInvalid
from .lmms_export import FOLDER as LMMS_FOLDER
from .lmms_export import harness_values, write_lmms_tasks
from .manifest import build_manifest, seal
from .plots import write_plots
from .reader import DATA_DIR, LEDGER_FILE, QUARANTINE_FILE, shard_name
from .validation import validate_release
from .versions import check_successor

DEFAULT_SHARD_ROWS = 5000
STAGING = ".tmp-"  # a staging folder: .tmp-<version>-<random>
log = logging.getLogger(__name__)


def _check_draft(draft: ReleaseDraft, target: Path) -> None:
    check_successor(draft.version, draft.parent_version)
    expected = set(draft.kind.configs)
    if set(draft.tables) != expected:
        raise ReleaseError(f"{draft.benchmark} release needs tables {sorted(expected)}, got {sorted(draft.tables)}")
    if target.exists():
        raise ReleaseExists(
            f"release {draft.benchmark} {draft.version} already exists at {target}; releases are immutable"
        )
    config = draft.kind.samples_config
    if draft.tables[config].num_rows == 0:
        raise ReleaseError(f"release {draft.benchmark} {draft.version} has no rows in {config!r}; nothing to publish")


def write_shards(
    table: pa.Table | SpilledTable, folder: Path, config: str, max_rows: int, store: ImageStore
) -> tuple[list[str], Features, int]:
    """Write ``table`` as ``<config>-0000i-of-0000N.parquet`` with its images embedded, one
    shard at a time (so only one shard's image bytes are in memory); return the paths
    relative to the release, the ``datasets`` features and the embedded rows' bytes in
    memory (Arrow; the card's ``num_bytes``)."""
    total = max(1, math.ceil(table.num_rows / max_rows))
    names = []
    nbytes = 0
    features: Features | None = None
    for index, rows in enumerate(table_chunks(table, max_rows)):
        name = shard_name(config, index, total)
        shard = with_hf_metadata(embed_images(rows, store))
        pq.write_table(shard, folder / name, compression="zstd")
        names.append(f"{DATA_DIR}/{name}")
        nbytes += shard.nbytes
        features = features or hf_features(shard.schema)
    assert features is not None  # total >= 1
    return names, features, nbytes


def _build(draft: ReleaseDraft, folder: Path, target: Path, store: ImageStore, max_rows: int) -> None:
    (folder / DATA_DIR).mkdir(parents=True)
    shards: dict[str, list[str]] = {}
    rows: dict[str, int] = {}
    sizes: dict[str, int] = {}  # bytes in memory (Arrow), the card's num_bytes
    features = {}
    for config in draft.kind.configs:
        shards[config], features[config], sizes[config] = write_shards(
            draft.tables[config], folder / DATA_DIR, config, max_rows, store
        )
        rows[config] = draft.tables[config].num_rows
    draft.ledger.write(folder / LEDGER_FILE)
    write_table(draft.quarantine, folder / QUARANTINE_FILE)
    plots = write_plots(draft.statistics, draft.kind.distributions(draft.tables), folder / "plots")
    exports = draft.kind.exports(draft.tables, folder, store) if draft.kind.exports else {}
    manifest = {
        **build_manifest(draft, rows, sizes, shards, target),
        "plots": plots,
        **({"exports": exports} if exports else {}),
    }
    if draft.kind.harness:
        values = harness_values(draft.benchmark, draft.version, draft.seed, draft.tables[draft.kind.samples_config])
        manifest["lmms_eval"] = write_lmms_tasks(
            draft.kind.harness(values),
            draft.kind.harness_factory,
            values,
            draft.benchmark,
            draft.version,
            folder / LMMS_FOLDER,
        )
    if draft.changelog:
        (folder / CHANGELOG).write_text(draft.changelog)
    (folder / "README.md").write_text(render_card(manifest, features, plots, draft.kind, draft.changelog))
    seal(folder, manifest)


def clear_stale_staging(folder: Path) -> list[str]:
    """Remove the staging folders in ``folder`` that no live writer holds (left by a writer that
    was killed); return their names."""
    removed = []
    for staging in sorted(folder.glob(f"{STAGING}*")):
        if staging.is_symlink() or not staging.is_dir():
            continue
        try:
            handle = os.open(staging, os.O_RDONLY)
        except OSError:  # removed meanwhile
            continue
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # a live writer's
            continue
        else:
            shutil.rmtree(staging, ignore_errors=True)
            removed.append(staging.name)
        finally:
            os.close(handle)
    return removed


def _staging(folder: Path, version: str) -> tuple[Path, int]:
    """A new staging folder for ``version``, locked (the open handle returned) before it takes
    its ``.tmp-`` name, so ``clear_stale_staging`` never sees it unlocked."""
    token = secrets.token_hex(4)
    fresh = folder / f".new-{version}-{token}"
    fresh.mkdir(parents=True)
    handle = os.open(fresh, os.O_RDONLY)
    fcntl.flock(handle, fcntl.LOCK_EX)
    temp = folder / f"{STAGING}{version}-{token}"
    os.rename(fresh, temp)
    return temp, handle


def write_release(
    draft: ReleaseDraft,
    root: Path,
    store: ImageStore,
    max_rows_per_shard: int = DEFAULT_SHARD_ROWS,
    folder: Path | None = None,
) -> Path:
    """Write, validate and publish ``draft`` as ``root/<benchmark>/<version>/`` (``folder``: the
    folder of the benchmark's versions instead of ``root/<benchmark>``, e.g. the one a re-curated
    release sits in, whatever it is called); return that path. Staging folders of killed writers
    in that folder are removed first, with a warning."""
    if max_rows_per_shard < 1:
        raise ReleaseError("max_rows_per_shard must be at least 1")
    target = (Path(folder) if folder is not None else Path(root) / draft.benchmark) / draft.version
    _check_draft(draft, target)
    if target.parent.is_dir():
        stale = clear_stale_staging(target.parent)
        if stale:
            log.warning(
                f"{target.parent}: removed {counted(len(stale), 'staging folder')} left by a killed "
                f"write: {', '.join(stale)}"
            )
    temp, handle = _staging(target.parent, draft.version)
    try:
        _build(draft, temp, target, store, max_rows_per_shard)
        outcome = validate_release(temp, draft.kind)
        if not outcome.success:
            raise ReleaseInvalid(
                f"release {draft.benchmark} {draft.version} failed validation: " + "; ".join(outcome.failures),
                outcome.failures,
            )
        if target.exists():  # another writer won the race while we were validating
            raise ReleaseExists(f"release {draft.benchmark} {draft.version} already exists at {target}")
        os.rename(temp, target)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    finally:
        os.close(handle)
    return target
