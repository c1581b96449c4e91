"""The dry-run DeflectionBench curation with ``workdir`` and ``releases_root`` in an object store
(a local moto S3 server, s3fs as the client: tests/s3_server.py), against the same run on
plain paths: the release's data files are the same bytes, ``verify`` passes on the S3 copy,
and only what a ``_COMPLETE`` marker names is ever read as a release."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from mmcurate.core.storage import MARKER, Location
from tests.dryrun import dryrun_config
from tests.flows.release_fingerprint import content_fingerprint
from tests.releases.cli_helpers import one_line, run_process

pytestmark = pytest.mark.slow


def on_s3(config: Path, bucket: str) -> Path:
    """``config`` with its workdir and releases root in ``bucket``."""
    data = yaml.safe_load(config.read_text())
    data["workdir"], data["releases_root"] = f"{bucket}/work", f"{bucket}/releases"
    path = config.with_name("dryrun-s3.yaml")
    path.write_text(yaml.safe_dump(data))
    return path


def data_files(release: Path) -> dict[str, bytes]:
    return {p.relative_to(release).as_posix(): p.read_bytes() for p in sorted((release / "data").rglob("*.parquet"))}


def test_the_dry_run_on_s3_publishes_the_local_release_byte_for_byte(
    tmp_path, fixtures_root, prefect_harness, s3_bucket, monkeypatch
):
    from mmcurate.flows.deflectionbench.curate import deflectionbench

    monkeypatch.setenv("MMCURATE_SCRATCH", str(tmp_path / "scratch"))
    (tmp_path / "local").mkdir()
    local = dryrun_config(tmp_path / "local", fixtures_root)
    local_release = Path(deflectionbench(config=str(local)))
    deflectionbench(config=str(on_s3(local, s3_bucket)))

    url = f"{s3_bucket}/releases/deflectionbench/1.0.0"
    stored = Location.parse(url)
    files = json.loads((stored / MARKER).read_bytes())["files"]
    assert {name for name in files if name.startswith("data/")} == set(data_files(local_release))
    for name, content in data_files(local_release).items():
        assert (stored / name).read_bytes() == content, name
    manifest = json.loads((stored / "manifest.json").read_bytes())
    assert manifest["config"]["workdir"] == f"{s3_bucket}/work"  # the URL, not a worker's scratch copy

    code, out, err = run_process("verify", url)
    assert code == 0 and out.strip().endswith("verified"), (out, err)
    # the S3 copy read back through the release reader is the local release's content
    from mmcurate.releases.reader import local_folder

    assert content_fingerprint(local_folder(url)) == content_fingerprint(local_release)

    stored_marker = (stored / MARKER).read_bytes()
    stored.fs.rm((stored / MARKER).path)  # as a writer that died before its marker leaves it
    monkeypatch.setenv("MMCURATE_SCRATCH", str(tmp_path / "fresh-scratch"))  # a worker with no copy of it
    code, out, err = run_process("verify", url)
    one_line(code, err, url, f"no {MARKER} marker")
    (stored / MARKER).write_bytes(stored_marker)


def test_a_crash_mid_publication_leaves_no_release_and_the_rerun_publishes_it(
    tmp_path, fixtures_root, prefect_harness, s3_bucket, monkeypatch
):
    import s3fs

    from mmcurate.core.storage import complete_children
    from mmcurate.flows.deflectionbench.curate import deflectionbench

    monkeypatch.setenv("MMCURATE_SCRATCH", str(tmp_path / "scratch"))
    (tmp_path / "home").mkdir()
    config = on_s3(dryrun_config(tmp_path / "home", fixtures_root, sources=("infoseek", "webqa")), s3_bucket)
    real_put = s3fs.S3FileSystem.put_file
    uploads = []

    def dies_on_the_third_upload(self, *args, **kwargs):
        if "/releases/" not in args[1]:  # the ingests and images go to the store too
            return real_put(self, *args, **kwargs)
        uploads.append(args)
        if len(uploads) == 3:
            raise ConnectionResetError("injected: the connection to the store dropped")
        return real_put(self, *args, **kwargs)

    # an instance made before the patch (an earlier test's, from fsspec's instance cache) holds its own
    # sync put_file (fsspec mirrors the async methods onto each instance), which the patch would miss
    s3fs.S3FileSystem.clear_instance_cache()
    monkeypatch.setattr(s3fs.S3FileSystem, "put_file", dies_on_the_third_upload)
    with pytest.raises(ConnectionResetError):
        deflectionbench(config=str(config))
    root = Location.parse(f"{s3_bucket}/releases/deflectionbench")
    url = f"{root}/1.0.0"
    assert (root / "1.0.0" / "data").exists() and complete_children(root) == []  # files, but no marker
    code, out, err = run_process("verify", url)
    one_line(code, err, f"no {MARKER} marker")

    monkeypatch.setattr(s3fs.S3FileSystem, "put_file", real_put)
    deflectionbench(config=str(config))  # the same run again: the local copy exists, its publication finishes
    assert complete_children(root) == ["1.0.0"]
    code, out, err = run_process("verify", url)
    assert code == 0, err
