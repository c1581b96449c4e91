"""Where stored things live: a plain path or an fsspec URL (``file://``, ``s3://``, ``gs://``,
``memory://``), and how a folder is published where the store has no rename.

A ``Location`` wraps ``fsspec.core.url_to_fs``: read and write bytes and Parquet (pyarrow takes
the fsspec filesystem), list, exists. A plain path or a ``file://`` URL is local: the pipeline
keeps its own code there (a temp folder renamed into place), unchanged in behaviour and speed.

An object store offers no rename, so a folder is published by the marker rule (the pattern of
datatrove's and NeMo Curator's stages): its files are written first, then one small object,
``_COMPLETE``, naming every file and its sha256. A reader trusts only a folder whose marker
exists and only the files it names; a folder without one is an incomplete publication (a
writer that died, or one still writing) and is refused, never read as complete.

Libraries that need a local file (faiss, SQLite, the release reader's Parquet and JSON) work on
a local copy: ``fetch_folder`` downloads a published folder once into the per-worker scratch
folder, keyed by its marker's sha256 (so a changed folder is a new copy, and an unchanged one
is never fetched twice), checking every file against the marker.

Credentials never appear in a URL (``Location.parse`` refuses one that carries them): s3fs and
gcsfs take them from the environment or fsspec's configuration (``FSSPEC_S3_*``).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import parse_qsl, urlsplit

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import MmcurateError

SCHEMES = ("file", "s3", "gs", "gcs", "memory")
MARKER = "_COMPLETE"
# query parameters that would put a credential into a config, a manifest or a log
SECRET_PARAMS = ("key", "secret", "token", "password", "signature", "credential", "sig")


class StorageError(MmcurateError):
    """A location is unusable (bad URL, a credential in it) or a stored folder cannot be read."""


class IncompleteFolder(StorageError):
    """A folder in an object store without its ``_COMPLETE`` marker: never read as complete."""


@contextmanager
def reading(what: str) -> Iterator[None]:
    """A store client's own errors (no credentials, no such bucket, unreachable) as one line."""
    try:
        yield
    except MmcurateError:
        raise
    except Exception as exc:
        raise StorageError(
            f"{what} cannot be read: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
        ) from None


def is_url(value: str | Path) -> bool:
    """``scheme://...`` (a plain path, relative or absolute, is not)."""
    return isinstance(value, str) and "://" in value


def check_url(url: str, what: str) -> None:
    """Refuse, with one line, a URL of an unknown scheme or one carrying a credential (``what``,
    when given, names the setting)."""
    what = f"{what}: " if what else ""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise StorageError(
            f"{what}unsupported URL scheme {parts.scheme!r} in {url!r}; use a path or one of "
            + ", ".join(f"{scheme}://" for scheme in SCHEMES)
        )
    if parts.scheme != "file" and parts.scheme != "memory" and not parts.netloc:
        raise StorageError(f"{what}{url!r} names no bucket ({parts.scheme}://BUCKET/PREFIX)")
    secret = (
        parts.password is not None
        or parts.username is not None
        or any(any(word in key.lower() for word in SECRET_PARAMS) for key, _ in parse_qsl(parts.query))
    )
    if secret:
        raise StorageError(
            f"{what}the URL carries a credential; give credentials through the environment or "
            "fsspec's configuration (e.g. AWS_ACCESS_KEY_ID), never in a URL"
        )


@dataclass(frozen=True)
class Location:
    """A folder or file: an absolute local path (``url`` has no scheme) or an fsspec URL."""

    url: str

    @classmethod
    def parse(cls, value: str | Path, what: str = "location") -> Location:
        """A location from a path or URL (``file://`` becomes its plain path); checked."""
        if isinstance(value, Path) or not is_url(value):
            return cls(str(Path(value).expanduser().absolute()))
        check_url(value, what)
        if value.startswith("file://"):
            return cls(str(Path(urlsplit(value).path).absolute()))
        return cls(value.rstrip("/"))

    @property
    def is_local(self) -> bool:
        return not is_url(self.url)

    @property
    def local_path(self) -> Path:
        if not self.is_local:
            raise StorageError(f"{self.url} is not a local path")
        return Path(self.url)

    @cached_property
    def _fs_and_path(self) -> tuple[Any, str]:
        import fsspec

        fs, path = fsspec.core.url_to_fs(self.url)
        return fs, str(path)

    @property
    def fs(self) -> Any:
        """The fsspec filesystem (``LocalFileSystem`` for a path)."""
        return self._fs_and_path[0]

    @property
    def path(self) -> str:
        """The path inside ``fs``."""
        return self._fs_and_path[1]

    @property
    def name(self) -> str:
        return self.url.rstrip("/").rsplit("/", 1)[-1]

    def __truediv__(self, part: str) -> Location:
        return Location(f"{self.url.rstrip('/')}/{part}")

    def __str__(self) -> str:
        return self.url

    def exists(self) -> bool:
        return bool(self.fs.exists(self.path))

    def children(self) -> list[str]:
        """Names directly under this folder (none when it does not exist)."""
        try:
            entries = self.fs.ls(self.path, detail=False)
        except FileNotFoundError:
            return []
        return sorted(entry.rstrip("/").rsplit("/", 1)[-1] for entry in entries)

    def open(self, mode: str = "rb") -> BinaryIO:
        if "w" in mode:
            self.fs.makedirs(self.fs._parent(self.path), exist_ok=True)
        handle: BinaryIO = self.fs.open(self.path, mode)
        return handle

    def read_bytes(self) -> bytes:
        return bytes(self.fs.cat_file(self.path))

    def write_bytes(self, data: bytes) -> None:
        self.fs.makedirs(self.fs._parent(self.path), exist_ok=True)
        self.fs.pipe_file(self.path, data)

    def read_parquet(self, columns: list[str] | None = None) -> pa.Table:
        return pq.read_table(self.path, columns=columns, filesystem=self.fs)

    def write_parquet(self, table: pa.Table, **options: Any) -> None:
        self.fs.makedirs(self.fs._parent(self.path), exist_ok=True)
        pq.write_table(table, self.path, filesystem=self.fs, **options)


def scratch_root() -> Path:
    """This worker's local scratch folder (``MMCURATE_SCRATCH``, else one under the system's
    temp folder): local copies of stored things, never shared between machines."""
    configured = os.environ.get("MMCURATE_SCRATCH")
    return Path(configured) if configured else Path(tempfile.gettempdir()) / f"mmcurate-scratch-{os.getuid()}"


def scratch_for(location: Location, what: str) -> Path:
    """The local working copy of a remote ``location`` (one folder per URL)."""
    return scratch_root() / "mirror" / hashlib.sha256(location.url.encode()).hexdigest()[:16] / what


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def is_complete(location: Location) -> bool:
    """A published folder: local, an existing directory; in an object store, its marker exists."""
    if location.is_local:
        return location.local_path.is_dir()
    return (location / MARKER).exists()


def _marker_bytes(location: Location) -> bytes:
    try:
        return (location / MARKER).read_bytes()
    except FileNotFoundError:
        raise IncompleteFolder(
            f"{location} has no {MARKER} marker: an unfinished publication (or not a published "
            "folder); nothing in it is read"
        ) from None


def complete_children(location: Location) -> list[str]:
    """Names of the published folders directly under ``location`` (only marked ones remotely)."""
    if location.is_local:
        folder = location.local_path
        return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    return [name for name in location.children() if (location / name / MARKER).exists()]


def publish_folder(source: Path, target: Location, exclude: tuple[str, ...] = (), racing: bool = False) -> None:
    """Publish the local folder ``source`` as ``target``, all or nothing to a reader.

    Local target: copied into a hidden temp folder beside it, then renamed into place. Object
    store: every file written at its key, then the marker naming each file's sha256, last. A
    target already complete is refused (published folders are immutable). ``exclude`` names
    top-level entries of ``source`` left out (in a local target too).

    ``racing``: several writers may publish the same target at once (a cache each can build,
    such as a vector index, whose bytes need not be identical between two builds). Each writer's
    files then go under a folder of its own, ``g-<random>/``, which its marker names
    (``under``): whichever marker is written last names one writer's complete set, never a mix."""
    if is_complete(target):
        raise StorageError(f"{target} is already published; published folders are immutable")
    if target.is_local:
        dest = target.local_path
        dest.parent.mkdir(parents=True, exist_ok=True)
        temp = dest.parent / f".tmp-{dest.name}-{secrets.token_hex(4)}"
        try:
            shutil.copytree(source, temp, ignore=lambda folder, names: exclude if Path(folder) == source else ())
            os.rename(temp, dest)
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise
        return
    marker: dict[str, Any] = {"files": {}}
    into = target
    if racing:
        marker["under"] = f"g-{secrets.token_hex(8)}"
        into = target / marker["under"]
    for relative in _files(source):
        if relative.split("/", 1)[0] in exclude:
            continue
        marker["files"][relative] = sha256_file(source / relative)
        target.fs.put_file(str(source / relative), (into / relative).path)
    (target / MARKER).write_bytes(json.dumps(marker, indent=1, sort_keys=True).encode())


def fetch_folder(location: Location, dest: Path | None = None) -> Path:
    """A local folder holding the published ``location``: the path itself when local, else a
    copy (at ``dest``, by default in the scratch folder keyed by the marker's sha256), fetched
    once, every file checked against the marker. IncompleteFolder when the marker is missing."""
    if location.is_local:
        return location.local_path
    raw = _marker_bytes(location)
    marker = json.loads(raw)
    files, under = marker["files"], location / marker["under"] if "under" in marker else location
    dest = dest or scratch_root() / "fetched" / hashlib.sha256(raw).hexdigest()[:16] / location.name
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    temp = dest.parent / f".tmp-{dest.name}-{secrets.token_hex(4)}"
    try:
        for relative, sha in files.items():
            local = temp / relative
            local.parent.mkdir(parents=True, exist_ok=True)
            location.fs.get_file((under / relative).path, str(local))
            if sha256_file(local) != sha:
                raise StorageError(f"{under / relative} does not match the sha256 its {MARKER} marker names")
        temp.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(temp, dest)
        except OSError:  # another process fetched the same folder meanwhile
            if not dest.is_dir():
                raise
            shutil.rmtree(temp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return dest


@dataclass(frozen=True)
class Mirror:
    """A stored folder as the pipeline works on it: ``local``, this worker's working copy, and
    ``remote``, the object store holding the shared truth (None: ``local`` is the store). The
    code reads and writes ``local``; ``pull`` fetches a published subfolder it lacks, ``push``
    publishes one it made (the marker rule)."""

    local: Path
    remote: Location | None = None

    def pull(self, relative: str) -> bool:
        """Fetch ``remote/relative`` into ``local/relative`` when only the store has it published;
        whether the local copy exists now."""
        dest = self.local / relative
        if self.remote is not None and not dest.exists() and is_complete(self.remote / relative):
            fetch_folder(self.remote / relative, dest)
        return dest.exists()

    def pull_children(self, relative: str) -> None:
        """Pull every published folder directly under ``remote/relative``."""
        if self.remote is not None:
            for name in complete_children(self.remote / relative if relative else self.remote):
                self.pull(f"{relative}/{name}" if relative else name)

    def push(self, relative: str, exclude: tuple[str, ...] = (), racing: bool = False) -> None:
        """Publish ``local/relative`` (without its top-level entries named in ``exclude``) as
        ``remote/relative`` unless the store has it already (``publish_folder``'s ``racing``)."""
        if self.remote is not None and not is_complete(self.remote / relative):
            publish_folder(self.local / relative, self.remote / relative, exclude, racing)

    def push_file(self, relative: str) -> None:
        """Upload the one file ``local/relative`` to ``remote/relative``. One object needs no
        marker: an object store shows a PUT (multipart ones included) whole or not at all.
        For files that never change once written (named by their content or their run)."""
        if self.remote is not None:
            target = self.remote / relative
            target.fs.makedirs(target.fs._parent(target.path), exist_ok=True)
            target.fs.put_file(str(self.local / relative), target.path)

    def pull_file(self, relative: str) -> Path:
        """``local/relative``, downloaded from ``remote/relative`` when only the store has it
        (FileNotFoundError when neither has it); never left half-written under its name."""
        dest = self.local / relative
        if self.remote is None or dest.exists():
            return dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        temp = dest.with_name(f".{dest.name}.{secrets.token_hex(4)}.tmp")
        try:
            source = self.remote / relative
            source.fs.get_file(source.path, str(temp))
            os.replace(temp, dest)
        finally:
            temp.unlink(missing_ok=True)
        return dest
