"""Content-addressed image store: every image lives once, at ``<sha[:2]>/<sha>.<ext>``.

Bytes are decode-checked with Pillow before they are stored (fully decoded, so a
truncated JPEG is caught), pixel counts are capped against decompression bombs, and
paths read from a source never resolve outside that source's root.
"""

from __future__ import annotations

import io
import os
import re
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from PIL import Image, ImageFile

from .errors import ImageRejected
from .ids import sha256_bytes
from .records import Rejected
from .storage import Location

MAX_PIXELS = 50_000_000  # ~7000x7000; larger images are rejected, not resized
FORMAT_EXT = {"JPEG": "jpg", "PNG": "png", "WEBP": "webp", "GIF": "gif", "BMP": "bmp", "TIFF": "tif"}
_OBJECT_REPR = re.compile(r" ?<[^<>]* at 0x[0-9a-fA-F]+>")
_STRICT = threading.Lock()


@contextmanager
def _strict_decoding() -> Iterator[None]:
    """Pillow's truncation check off-switch is one process-wide flag, and libraries turn it on
    when imported (lmms-eval's ``api.task`` sets ``ImageFile.LOAD_TRUNCATED_IMAGES = True``):
    a truncated file would then decode padded with grey and be stored. The check decodes
    with the flag off and puts back what it found."""
    with _STRICT:
        before = ImageFile.LOAD_TRUNCATED_IMAGES
        ImageFile.LOAD_TRUNCATED_IMAGES = False
        try:
            yield
        finally:
            ImageFile.LOAD_TRUNCATED_IMAGES = before


def check_image(data: bytes, max_pixels: int = MAX_PIXELS) -> str:
    """Decode ``data`` fully; return the file extension of its format or raise ImageRejected."""
    if not data:
        raise ImageRejected("empty image file")
    try:
        with warnings.catch_warnings(), _strict_decoding():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as img:
                width, height = img.size
                if width * height > max_pixels:
                    raise ImageRejected(f"image too large: {width}x{height} pixels exceeds {max_pixels}")
                img.load()  # full decode: truncated files raise here
                fmt = img.format or ""
    except ImageRejected:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageRejected(f"decompression bomb: {exc}") from None
    except Exception as exc:  # Pillow raises many types for corrupt data
        raise ImageRejected(f"undecodable image: {type(exc).__name__}: {stable_text(str(exc))}") from None
    if fmt not in FORMAT_EXT:
        raise ImageRejected(f"unsupported image format {fmt or 'unknown'}")
    return FORMAT_EXT[fmt]


def stable_text(text: str, folder: Path | None = None) -> str:
    """``text`` without what differs between two runs over the same data: object reprs with a
    memory address (``<_io.BytesIO object at 0x7f..>``) and the absolute path of ``folder``
    (paths under it become relative), so identical runs write identical quarantine reasons."""
    text = _OBJECT_REPR.sub("", text)
    if folder is not None:
        text = text.replace(str(_real(Path(folder))) + os.sep, "")
    return text


@lru_cache(maxsize=64)
def _real(root: Path) -> Path:
    return root.resolve()


def resolve_inside(root: Path, relative: str) -> Path:
    """Join ``relative`` to ``root``; refuse absolute paths and any that escape the root."""
    if not relative or os.path.isabs(relative):
        raise ImageRejected(f"image path {relative!r} is not relative to the source root")
    root_real = _real(Path(root))
    target = (root_real / relative).resolve()
    if target != root_real and root_real not in target.parents:
        raise ImageRejected(f"image path {relative!r} escapes the source root")
    return target


class ImageStore:
    """A directory of decode-checked images named by the sha256 of their bytes.

    With a ``remote`` (the workdir in an object store, ``Settings.image_store``), the directory is
    this machine's copy of the shared store: an image put here is uploaded (one object, whole or
    absent) before it appears under its local name, so a local image is always in the store too;
    one missing here is fetched from the store when asked for (a worker reads what the ingest on
    another machine stored)."""

    def __init__(self, root: Path | str, max_pixels: int = MAX_PIXELS, remote: Location | None = None) -> None:
        self.root = Path(root)
        self.max_pixels = max_pixels
        self.remote = remote

    def put(self, data: bytes) -> str:
        """Check and store ``data``; return its sha256. Idempotent."""
        sha = sha256_bytes(data)
        # only this copy is looked at: uploading the same bytes again costs less than a listing
        if self._local(sha) is not None:
            return sha
        ext = check_image(data, self.max_pixels)
        path = self.root / sha[:2] / f"{sha}.{ext}"
        path.parent.mkdir(parents=True, exist_ok=True)
        # a name per writer: two threads of one ingest (parts of a dump) can store one image at once
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        if self.remote is not None:
            target = self.remote / f"{sha[:2]}/{path.name}"
            target.fs.makedirs(target.fs._parent(target.path), exist_ok=True)
            target.fs.put_file(str(tmp), target.path)
        os.replace(tmp, path)  # never a half-written image under its final name
        return sha

    def put_file(self, root: Path, relative: str) -> str:
        """Store the image at ``relative`` under ``root``; raise ImageRejected if unusable,
        including paths the OS cannot use (a NUL byte, an over-long name, no permission)."""
        try:
            path = resolve_inside(root, relative)
            if not path.is_file():
                raise ImageRejected(f"image file missing: {relative}")
            data = path.read_bytes()
        except (OSError, ValueError) as exc:
            if isinstance(exc, ImageRejected):
                raise
            reason = f"unusable image path {relative[:200]!r}: {type(exc).__name__}: {stable_text(str(exc), root)}"
            raise ImageRejected(reason[:500]) from None
        return self.put(data)

    def find(self, sha: str) -> Path | None:
        """The stored file of ``sha``, or None: one stat per known extension (a folder of the
        store holds 1/256 of all images, far too many to list on every lookup)."""
        found = self._local(sha)
        if found is None and self.remote is not None:
            found = self._fetch(sha)
        return found

    def _local(self, sha: str) -> Path | None:
        folder = self.root / sha[:2]
        for ext in FORMAT_EXT.values():
            candidate = folder / f"{sha}.{ext}"
            if candidate.is_file():
                return candidate
        return None

    def _fetch(self, sha: str) -> Path | None:
        """The image ``sha`` downloaded from the remote store into this copy (one listing), or None."""
        assert self.remote is not None
        folder = self.remote / sha[:2]
        names = [name for name in folder.children() if name.rsplit(".", 1)[0] == sha]
        if not names:
            return None
        path = self.root / sha[:2] / names[0]
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            folder.fs.get_file((folder / names[0]).path, str(tmp))
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return path

    def path(self, sha: str) -> Path:
        found = self.find(sha)
        if found is None:
            raise KeyError(f"image {sha} is not in the store at {self.root}")
        return found

    def read(self, sha: str) -> bytes:
        return self.path(sha).read_bytes()

    def __contains__(self, sha: str) -> bool:
        return self.find(sha) is not None


def store_folder(store: ImageStore, folder: Path) -> tuple[list[str], list[Rejected]]:
    """Put every image file under ``folder`` into ``store``: its sha256s, and a quarantine
    record for each file that is not a usable image."""
    hashes: list[str] = []
    rejected: list[Rejected] = []
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        relative = str(path.relative_to(folder))
        try:
            hashes.append(store.put_file(Path(folder), relative))
        except ImageRejected as exc:
            rejected.append(Rejected(f"{Path(folder).name}/{relative}", str(exc)))
    return hashes, rejected
