"""``datasets.load_dataset`` reads a release's shards from an object store, with the call the
README's "Loading a release" shows (the local S3 server of tests/s3_server.py)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from mmcurate.core.storage import Location, fetch_folder, publish_folder


def test_load_dataset_reads_a_published_release_from_s3(tmp_path, s3_bucket, s3_server, monkeypatch):
    import datasets.config
    from datasets import load_dataset

    # datasets refuses every remote URL in offline mode; this one is the loopback S3 server
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("MMCURATE_SCRATCH", str(tmp_path / "scratch"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf"))
    (tmp_path / "release" / "data").mkdir(parents=True)
    for index in range(2):
        pq.write_table(
            pa.table({"sample_id": [f"s{index}a", f"s{index}b"], "question": ["q", "q"]}),
            tmp_path / "release" / "data" / f"test-0000{index}-of-00002.parquet",
        )
    url = f"{s3_bucket}/releases/deflectionbench/1.0.0"
    publish_folder(tmp_path / "release", Location.parse(url))
    assert fetch_folder(Location.parse(url)).is_dir()  # published by the marker rule

    ds = load_dataset(
        "parquet",
        data_files={"test": f"{url}/data/*.parquet"},
        split="test",
        storage_options={"endpoint_url": s3_server, "key": "testing", "secret": "testing"},
    )
    assert sorted(ds["sample_id"]) == ["s0a", "s0b", "s1a", "s1b"]
