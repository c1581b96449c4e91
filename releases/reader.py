"""Open a written release: manifest, per-config tables, ledger, quarantine.

Only directories named by a semantic version are releases; ``.tmp-*`` directories are
writes in progress (or left by a crash) and are never listed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from mmcurate.core.errors import MmcurateError
from mmcurate.core.storage import Location, Mirror, fetch_folder, is_url, reading, scratch_for

from .errors import ReleaseError
from .manifest import MANIFEST, load_manifest
from .manifest_model import Manifest
from .versions import SEMVER, parse_version

DATA_DIR = "data"
LEDGER_FILE = "ledger.parquet"
QUARANTINE_FILE = "quarantine.parquet"


def shard_name(config: str, index: int, total: int) -> str:
    return f"{config}-{index:05d}-of-{total:05d}.parquet"


def read_parquet(path: Path, columns: list[str] | None = None) -> pa.Table:
    """A Parquet file of a release; ReleaseError (one line) when it is missing or unreadable
    (a truncated or damaged shard: ``mmcurate verify`` says which checksums differ)."""
    try:
        return pq.read_table(path, columns=columns)
    except (OSError, pa.ArrowException) as exc:
        raise _unreadable(path, exc) from None


def read_schema(path: Path) -> pa.Schema:
    """A Parquet file's schema; ReleaseError (one line) as ``read_parquet``."""
    try:
        return pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise _unreadable(path, exc) from None


def _unreadable(path: Path, exc: Exception) -> ReleaseError:
    return ReleaseError(f"{path} is unreadable: {str(exc).splitlines()[0]} (run `mmcurate verify`)")


@dataclass
class Release:
    path: Path
    manifest: Manifest = field(repr=False)

    @property
    def benchmark(self) -> str:
        return self.manifest.benchmark

    @property
    def version(self) -> str:
        return self.manifest.version

    @property
    def pretty_name(self) -> str:
        return self.manifest.pretty_name or self.benchmark

    @property
    def content_id(self) -> str:
        """What this release holds, as one id: the digest sealing its file list (two releases that
        share a benchmark and version but not their files have different ids)."""
        sealed = self.manifest.sealed
        return sealed if sealed is not None else hashlib.sha256((self.path / MANIFEST).read_bytes()).hexdigest()

    @property
    def configs(self) -> list[str]:
        """The release's Hugging Face configs in the order written: the first holds one row per
        sample (``sample_id``), as ``ReleaseKind.configs`` puts it."""
        return list(self.manifest.shards)

    @property
    def samples_config(self) -> str:
        return self.configs[0]

    def shard_paths(self, config: str) -> list[Path]:
        """The config's shards. A shard the manifest names outside the release folder (an
        absolute path, ``..``, a link out) is refused: a release reads only its own files."""
        try:
            names = self.manifest.shards[config]
        except KeyError:
            raise ReleaseError(f"release {self.path} has no config {config!r}; it has {self.configs}") from None
        root = self.path.resolve()
        for name in names:
            if not (self.path / name).resolve().is_relative_to(root):
                raise ReleaseError(
                    f"{self.path / MANIFEST} names the shard {name!r} of config {config!r}, outside "
                    "the release: a release reads only its own files"
                )
        return [self.path / name for name in names]

    def table(self, config: str) -> pa.Table:
        """One config as Arrow (images embedded as ``{bytes, path}`` structs)."""
        return pa.concat_tables([read_parquet(p) for p in self.shard_paths(config)])

    def batches(self, config: str, batch_size: int = 1024) -> Iterator[pa.RecordBatch]:
        """One config as Arrow record batches, shard after shard (bounded memory)."""
        for path in self.shard_paths(config):
            try:
                yield from pq.ParquetFile(path).iter_batches(batch_size=batch_size)
            except (OSError, pa.ArrowException) as exc:
                raise _unreadable(path, exc) from None

    def frame(self, config: str) -> pl.DataFrame:
        frame = pl.from_arrow(self.table(config))
        assert isinstance(frame, pl.DataFrame)  # a table, not an array
        return frame

    @cached_property
    def ledger(self) -> pa.Table:
        return read_parquet(self.path / LEDGER_FILE)

    @cached_property
    def quarantine(self) -> pa.Table:
        return read_parquet(self.path / QUARANTINE_FILE)

    @cached_property
    def sample_ids(self) -> list[str]:
        """Ids of the samples in the release, in row order."""
        ids: list[str] = []
        for path in self.shard_paths(self.samples_config):
            ids += read_parquet(path, columns=["sample_id"]).column("sample_id").to_pylist()
        return ids


def open_release(path: Path | str) -> Release:
    path = Path(path)
    if not path.is_dir():
        raise ReleaseError(f"release directory not found: {path}")
    return Release(path=path, manifest=load_manifest(path))


def local_folder(value: str | Path, versions: bool = False) -> Path:
    """A release folder (``versions``: a benchmark's folder of versions) given as a path or a URL,
    as a local folder: at an object-store URL, what its ``_COMPLETE`` markers name is fetched into
    this worker's scratch folder (a release without one is refused), so every command that reads
    a release reads one at a URL."""
    if not is_url(str(value)):
        return Path(value)
    try:
        location = Location.parse(str(value), "release")
        if location.is_local:
            return location.local_path
        with reading(str(value)):
            if versions:
                mirror = Mirror(scratch_for(location, "versions") / location.name, location)
                mirror.pull_children("")
                return mirror.local
            return fetch_folder(location)
    except MmcurateError as exc:
        raise ReleaseError(str(exc)) from None


def list_versions(root: Path | str, benchmark: str) -> list[str]:
    """Published versions of ``benchmark`` under ``root``, oldest first."""
    folder = Path(root) / benchmark
    if not folder.is_dir():
        return []
    versions = [p.name for p in folder.iterdir() if p.is_dir() and SEMVER.match(p.name)]
    return sorted(versions, key=parse_version)


def enclosing_release(path: Path | str) -> Path | None:
    """The release folder that ``path`` is or lies in (a folder whose ``manifest.json`` is a
    release manifest), or None. ``path`` need not exist yet."""
    start = Path(path).resolve()
    for folder in (start, *start.parents):
        if (folder / MANIFEST).is_file():
            try:
                load_manifest(folder)
            except ReleaseError:
                continue
            return folder
    return None


def refuse_inside_release(path: Path | str, what: str, release: Path | str | None = None) -> None:
    """Refuse an output folder (``what``: the option naming it) that is or lies inside a release
    (any, or the ``release`` the command reads): a release is immutable and checksummed, and a
    file written into it breaks ``verify``."""
    out = Path(path).resolve()
    given = Path(release).resolve() if release is not None else None
    inside = given if given is not None and (out == given or given in out.parents) else enclosing_release(out)
    if inside is not None:
        raise ReleaseError(f"{what} {path} lies inside the release {inside}; releases are immutable, write elsewhere")
