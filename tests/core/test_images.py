import io
import os
from functools import partial
from pathlib import Path

import pytest
from PIL import Image

from mmcurate.core.errors import ImageRejected
from mmcurate.core.images import ImageStore, check_image, resolve_inside, stable_text
from tests.at_once import run_at_once


def _png(size=(8, 8), color=(200, 10, 10)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


def _jpeg() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (0, 90, 200)).save(buf, format="JPEG")
    return buf.getvalue()


def test_put_is_content_addressed_and_idempotent(tmp_path):
    store = ImageStore(tmp_path)
    sha = store.put(_png())
    assert store.put(_png()) == sha
    path = store.path(sha)
    assert path == tmp_path / sha[:2] / f"{sha}.png"
    assert store.read(sha) == _png()
    assert sha in store
    assert not list(tmp_path.rglob("*.tmp"))


def test_truncated_jpeg_is_rejected():
    data = _jpeg()
    with pytest.raises(ImageRejected, match="undecodable"):
        check_image(data[: len(data) // 2])


def test_truncated_jpeg_is_rejected_when_another_library_allows_truncated_images(monkeypatch):
    """Importing lmms-eval sets Pillow's process-wide LOAD_TRUNCATED_IMAGES; the check stays
    strict and leaves the flag as it found it."""
    from PIL import ImageFile

    from tests.fixtures.builders.infoseek import truncated_jpeg

    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)
    with pytest.raises(ImageRejected, match="undecodable"):
        check_image(truncated_jpeg())  # the fixtures' truncated image: padded and accepted before
    assert ImageFile.LOAD_TRUNCATED_IMAGES is True
    assert check_image(_jpeg()) == "jpg"


def test_decompression_bomb_is_rejected():
    with pytest.raises(ImageRejected, match="too large|decompression bomb"):
        check_image(_png(size=(10000, 10000), color=(0, 0, 0)), max_pixels=1_000_000)


def test_garbage_and_empty_are_rejected():
    with pytest.raises(ImageRejected, match="undecodable"):
        check_image(b"not an image at all")
    with pytest.raises(ImageRejected, match="empty"):
        check_image(b"")


def test_paths_cannot_escape_the_root(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "secret.png").write_bytes(_png())
    with pytest.raises(ImageRejected, match="escapes"):
        resolve_inside(tmp_path / "root", "../secret.png")
    with pytest.raises(ImageRejected, match="not relative"):
        resolve_inside(tmp_path / "root", str(tmp_path / "secret.png"))
    os.symlink(tmp_path / "secret.png", tmp_path / "root" / "link.png")
    with pytest.raises(ImageRejected, match="escapes"):
        resolve_inside(tmp_path / "root", "link.png")


def test_put_file_reports_missing_files(tmp_path):
    store = ImageStore(tmp_path / "store")
    with pytest.raises(ImageRejected, match="missing"):
        store.put_file(tmp_path, "nope.jpg")


def test_stable_text_drops_addresses_and_the_folder(tmp_path: Path) -> None:
    text = (
        "undecodable image: UnidentifiedImageError: cannot identify image file <_io.BytesIO object at 0x7f3a9c2b1d60>"
    )
    assert stable_text(text) == "undecodable image: UnidentifiedImageError: cannot identify image file"
    path = f"OSError: [Errno 36] File name too long: '{tmp_path.resolve()}/images/x.jpg'"
    assert stable_text(path, tmp_path) == "OSError: [Errno 36] File name too long: 'images/x.jpg'"


def test_rejection_reasons_are_the_same_in_every_run(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "store")
    (tmp_path / "junk.jpg").write_bytes(b"not an image at all")
    for put in (
        lambda: store.put(b"not an image at all"),
        lambda: store.put_file(tmp_path, "junk.jpg"),
        lambda: store.put_file(tmp_path, "x" * 300 + ".jpg"),
    ):
        reasons = set()
        for _ in range(2):
            with pytest.raises(ImageRejected) as caught:
                put()
            reasons.add(str(caught.value))
        (reason,) = reasons
        assert "0x" not in reason and str(tmp_path) not in reason


def test_threads_storing_the_same_image_at_once_all_succeed(tmp_path: Path) -> None:
    """Parts of one dump are ingested on threads sharing one store; a repost stores the same bytes
    from two parts. With one temporary name per process, one writer's rename took the other's file."""
    data = _png()
    for trial in range(40):  # the old code failed on about 4 in 10 of these
        store = ImageStore(tmp_path / str(trial))
        shas, errors = run_at_once(partial(store.put, data), threads=6)
        assert errors == []
        assert len(set(shas)) == 1
        stored = store.find(shas[0])
        assert stored is not None and stored.read_bytes() == data
        assert [p.name for p in stored.parent.iterdir()] == [stored.name]  # no temporary left behind


def test_a_store_behind_an_object_store_shares_images_between_machines(tmp_path):
    import secrets

    from mmcurate.core.storage import Location

    remote = Location.parse(f"memory://images-{secrets.token_hex(4)}")
    here = ImageStore(tmp_path / "here", remote=remote)
    sha = here.put(_png())
    assert (remote / sha[:2] / f"{sha}.png").read_bytes() == _png()  # uploaded before it is stored here
    there = ImageStore(tmp_path / "there", remote=remote)  # another machine's empty copy
    assert sha in there and there.read(sha) == _png() and there.path(sha).is_relative_to(tmp_path / "there")
    assert ImageStore(tmp_path / "alone").find(sha) is None and there.find("0" * 64) is None
