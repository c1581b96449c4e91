"""core/storage.py: locations at a path or a URL, and the marker rule of publication."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pyarrow as pa
import pytest

from mmcurate.core import storage
from mmcurate.core.storage import MARKER, IncompleteFolder, Location, StorageError


@pytest.fixture(autouse=True)
def scratch(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("MMCURATE_SCRATCH", str(tmp_path / "scratch"))
    return tmp_path / "scratch"


@pytest.fixture
def memory() -> Location:
    return Location.parse(f"memory://mmcurate-{secrets.token_hex(4)}")


def folder(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "data").mkdir(parents=True, exist_ok=True)
    (src / "data" / "a.bin").write_bytes(b"aaa")
    (src / "manifest.json").write_text('{"x": 1}')
    return src


def test_paths_and_file_urls_are_local_and_urls_keep_their_scheme(tmp_path):
    assert Location.parse(tmp_path).local_path == tmp_path
    assert Location.parse(f"file://{tmp_path}/x").local_path == tmp_path / "x"
    remote = Location.parse("s3://bucket/prefix/")
    assert not remote.is_local and remote.url == "s3://bucket/prefix" and (remote / "a").url == "s3://bucket/prefix/a"


@pytest.mark.parametrize(
    "url, words",
    [
        ("ftp://host/x", "unsupported URL scheme 'ftp'"),
        ("s3://AKIA:wJalr@bucket/x", "carries a credential"),
        ("s3://bucket/x?aws_secret_access_key=abc", "carries a credential"),
        ("s3:///x", "names no bucket"),
    ],
)
def test_bad_urls_are_refused_in_one_line(url, words):
    with pytest.raises(StorageError, match=words) as caught:
        Location.parse(url, "workdir")
    assert "\n" not in str(caught.value) and str(caught.value).startswith("workdir: ")
    assert "wJalr" not in str(caught.value) and "abc" not in str(caught.value)


def test_bytes_parquet_and_listing_through_a_url(memory):
    (memory / "a" / "b.txt").write_bytes(b"hi")
    table = pa.table({"x": [1, 2]})
    (memory / "t.parquet").write_parquet(table)
    assert (memory / "a" / "b.txt").read_bytes() == b"hi"
    assert (memory / "t.parquet").read_parquet().equals(table)
    assert memory.children() == ["a", "t.parquet"] and (memory / "a").exists() and not (memory / "nope").exists()


def test_published_folder_round_trips_and_is_fetched_once_by_its_marker(tmp_path, memory, scratch):
    target = memory / "v1"
    storage.publish_folder(folder(tmp_path), target)
    files = json.loads((target / MARKER).read_bytes())["files"]
    assert sorted(files) == ["data/a.bin", "manifest.json"]
    local = storage.fetch_folder(target)
    assert (local / "data" / "a.bin").read_bytes() == b"aaa" and local.is_relative_to(scratch)
    assert storage.fetch_folder(target) == local  # keyed by the marker: not fetched again
    assert storage.complete_children(memory) == ["v1"]
    with pytest.raises(StorageError, match="already published"):
        storage.publish_folder(folder(tmp_path), target)


def test_a_folder_without_its_marker_is_refused_and_not_listed(tmp_path, memory):
    (memory / "v1" / "manifest.json").write_bytes(b"{}")  # a writer that died before its marker
    with pytest.raises(IncompleteFolder, match=f"no {MARKER} marker"):
        storage.fetch_folder(memory / "v1")
    assert storage.complete_children(memory) == [] and not storage.is_complete(memory / "v1")


def test_a_crash_mid_publication_leaves_nothing_complete(tmp_path, memory, monkeypatch):
    calls = []
    real = memory.fs.put_file

    def dies_on_the_second_file(*args, **kwargs):
        calls.append(args)
        if len(calls) == 2:
            raise OSError("connection reset")
        return real(*args, **kwargs)

    monkeypatch.setattr(type(memory.fs), "put_file", lambda self, *a, **k: dies_on_the_second_file(*a, **k))
    with pytest.raises(OSError):
        storage.publish_folder(folder(tmp_path), memory / "v1")
    assert (memory / "v1").exists() and not storage.is_complete(memory / "v1")
    with pytest.raises(IncompleteFolder):
        storage.fetch_folder(memory / "v1")


def test_a_changed_file_fails_the_markers_check(tmp_path, memory):
    storage.publish_folder(folder(tmp_path), memory / "v1")
    (memory / "v1" / "data" / "a.bin").write_bytes(b"tampered")
    with pytest.raises(StorageError, match="does not match the sha256"):
        storage.fetch_folder(memory / "v1")


def test_local_publication_renames_a_temp_folder_into_place(tmp_path):
    target = Location.parse(f"file://{tmp_path}/out/v1")
    storage.publish_folder(folder(tmp_path), target)
    assert (tmp_path / "out" / "v1" / "data" / "a.bin").read_bytes() == b"aaa"
    assert not (tmp_path / "out" / "v1" / MARKER).exists() and sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "v1"
    ]
    assert storage.fetch_folder(target) == tmp_path / "out" / "v1"


def write_config(tmp_path: Path, **values: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text("".join(f"{key}: {value}\n" for key, value in values.items()))
    return path


def test_workdir_and_releases_root_take_a_url_and_manifests_record_it(tmp_path, scratch):
    from mmcurate.core.config import load_config

    settings = load_config(write_config(tmp_path, workdir="s3://bucket/work", releases_root=f"file://{tmp_path}/rel"))
    assert settings.workdir.is_relative_to(scratch)  # this worker's working copy of it
    assert settings.releases_root == tmp_path / "rel" and settings.mirror("releases_root").remote is None
    assert settings.resolved()["workdir"] == "s3://bucket/work"
    assert settings.mirror("workdir") == storage.Mirror(settings.workdir, Location("s3://bucket/work"))
    relative = load_config(
        write_config(tmp_path, workdir="work")
    )  # a plain relative path: against the config, as before
    assert relative.mirror("workdir") == storage.Mirror(tmp_path / "work")


@pytest.mark.parametrize(
    "value, words",
    [
        ("ftp://host/work", "workdir: Value error, unsupported URL scheme 'ftp'"),
        ("s3://AKIAX:hunter2@bucket/work", "workdir: Value error, the URL carries a credential"),
    ],
)
def test_a_bad_workdir_url_is_one_line_and_never_echoes_a_secret(tmp_path, value, words):
    from mmcurate.core.config import load_config
    from mmcurate.core.errors import ConfigError

    with pytest.raises(ConfigError, match=words) as caught:
        load_config(write_config(tmp_path, workdir=value))
    assert "\n" not in str(caught.value) and "hunter2" not in str(caught.value)


def test_a_store_clients_own_error_is_one_line(memory, monkeypatch):
    def no_credentials(*args, **kwargs):
        raise PermissionError("Unable to locate credentials\nmore detail")

    monkeypatch.setattr(type(memory.fs), "cat_file", no_credentials)
    with pytest.raises(
        StorageError, match=r"^s3://b/1.0.0 cannot be read: PermissionError: Unable to locate credentials$"
    ):
        with storage.reading("s3://b/1.0.0"):
            storage.fetch_folder(memory / "v1")


def test_single_files_go_to_the_store_and_come_back_whole(tmp_path, memory):
    writer = storage.Mirror(tmp_path / "w1", memory)
    (writer.local / "runs" / "r").mkdir(parents=True)
    (writer.local / "runs" / "r" / "part.parquet").write_bytes(b"decisions")
    writer.push_file("runs/r/part.parquet")
    reader = storage.Mirror(tmp_path / "w2", memory)  # another machine: an empty copy of the workdir
    got = reader.pull_file("runs/r/part.parquet")
    assert got == tmp_path / "w2" / "runs" / "r" / "part.parquet" and got.read_bytes() == b"decisions"
    with pytest.raises(FileNotFoundError):
        reader.pull_file("runs/r/missing.parquet")
    assert sorted(p.name for p in got.parent.iterdir()) == ["part.parquet"]  # no temp file left behind


def test_a_folder_is_published_without_the_entries_it_excludes(tmp_path, memory):
    src = folder(tmp_path)
    (src / "parts" / "2024-01").mkdir(parents=True)
    (src / "parts" / "2024-01" / "samples.parquet").write_bytes(b"part")
    storage.publish_folder(src, memory / "ingest", exclude=("parts",))
    assert sorted(json.loads((memory / "ingest" / MARKER).read_bytes())["files"]) == ["data/a.bin", "manifest.json"]
    storage.publish_folder(src, Location.parse(tmp_path / "copy"), exclude=("parts",))
    assert sorted(p.name for p in (tmp_path / "copy").iterdir()) == ["data", "manifest.json"]


def test_on_another_machine_a_stored_workdir_has_that_machines_copy(tmp_path, monkeypatch):
    import pickle

    from mmcurate.core.config import load_config

    monkeypatch.setenv("MMCURATE_SCRATCH", str(tmp_path / "flow"))
    settings = load_config(write_config(tmp_path, workdir="s3://bucket/work"))
    monkeypatch.setenv("MMCURATE_SCRATCH", str(tmp_path / "worker"))  # the worker that unpickles them
    there = pickle.loads(pickle.dumps(settings)).on_this_machine()
    assert settings.workdir.is_relative_to(tmp_path / "flow") and there.workdir.is_relative_to(tmp_path / "worker")
    assert there.mirror("workdir").remote == Location("s3://bucket/work") and there.resolved() == settings.resolved()
    local = load_config(write_config(tmp_path, workdir=str(tmp_path / "work")))
    assert local.on_this_machine() is local  # a plain path is the same folder everywhere it is used


def test_racing_writers_of_one_folder_leave_one_writers_files_never_a_mix(tmp_path, memory, scratch):
    first, second = tmp_path / "one", tmp_path / "two"
    for src, text in ((first, b"built by one"), (second, b"built by two")):  # two builds of one index
        (src / "sub").mkdir(parents=True)
        (src / "index.faiss").write_bytes(text)
        (src / "sub" / "meta.json").write_bytes(text + b" meta")
    target = memory / "indexes" / "kb-1"
    storage.publish_folder(first, target, racing=True)
    marker_one = (target / MARKER).read_bytes()
    target.fs.rm((target / MARKER).path)  # the second writer checked before the first's marker landed
    storage.publish_folder(second, target, racing=True)
    fetched = storage.fetch_folder(target, tmp_path / "copy")
    assert (fetched / "index.faiss").read_bytes() == b"built by two"
    assert (fetched / "sub" / "meta.json").read_bytes() == b"built by two meta"
    (target / MARKER).write_bytes(marker_one)  # the first writer's marker written last instead
    again = storage.fetch_folder(target, tmp_path / "copy-2")
    assert (again / "index.faiss").read_bytes() == b"built by one"
    assert (again / "sub" / "meta.json").read_bytes() == b"built by one meta"
