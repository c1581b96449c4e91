"""Writing releases and reading them back with datasets and polars."""

from __future__ import annotations

import json
import logging
import re
import shutil

import polars as pl
import pyarrow as pa
import pytest
import yaml
from PIL import Image

from mmcurate.core.stages import StageResult
from mmcurate.releases.completeness import Shortfall
from mmcurate.releases.errors import ReleaseError, ReleaseExists
from mmcurate.releases.near_duplicates import near_duplicate_note
from mmcurate.releases.reader import list_versions, open_release
from mmcurate.releases.report import write_report
from mmcurate.releases.writer import write_release
from tests.releases import release_builders as b


def test_layout_manifest_and_shards(deflection_release):
    names = {p.relative_to(deflection_release).as_posix() for p in deflection_release.rglob("*") if p.is_file()}
    assert {
        "data/test-00000-of-00002.parquet",
        "data/test-00001-of-00002.parquet",
        "ledger.parquet",
        "quarantine.parquet",
        "manifest.json",
        "README.md",
        "plots/funnel.png",
        "plots/convergence.png",
        "quality/validation.json",
        "quality/checksums.json",
        "quality/data_docs/index.html",
    } <= names
    m = json.loads((deflection_release / "manifest.json").read_text())
    assert (m["benchmark"], m["version"], m["parent"], m["seed"], m["k_min"]) == (
        "deflectionbench",
        "1.0.0",
        None,
        7,
        3,
    )
    assert m["created"].endswith("+00:00")
    assert m["code_version"]["git_commit"]
    assert m["counts"]["rows"] == {"test": 6}
    assert m["components"]["image_encoder"] == "descriptor-hsv-hog-v1"
    assert m["models"][0]["revision"] == "q8"
    assert set(m["files"]) == {n for n in names if n != "manifest.json" and not n.startswith("quality/")}
    assert all(len(e["sha256"]) == 64 and e["size"] > 0 for e in m["files"].values())


def test_card_declares_configs_and_image_features(deflection_release):
    card = (deflection_release / "README.md").read_text()
    header = card.split("---")[1]
    meta = yaml.safe_load(header)
    assert meta["configs"] == [
        {"config_name": "test", "data_files": [{"split": "test", "path": "data/test-*.parquet"}], "default": True}
    ]
    features = {f["name"]: f for f in meta["dataset_info"][0]["features"]}
    assert features["images"]["list"] == "image"
    assert "## Limitations" in card and "descriptor stand-in" in card
    assert "| source | ingested | retained |" in card
    assert "plots/funnel.png" in card


def test_datasets_decodes_images(deflection_release, tmp_path):
    from datasets import load_dataset

    ds = load_dataset("parquet", data_dir=str(deflection_release / "data"), cache_dir=str(tmp_path), split="test")
    assert ds.num_rows == 6
    row = ds[0]
    assert isinstance(row["images"][0], Image.Image) and row["images"][0].size == (64, 48)
    negatives = row["negative_contexts"]
    image_contexts = [c for c in negatives if c["modality"] == "image"]
    assert isinstance(image_contexts[0]["image"], Image.Image)
    assert [c["image"] for c in negatives if c["modality"] == "text"] == [None] * 3


def test_datasets_loads_release_folder_by_card_config(deflection_release, tmp_path):
    from datasets import load_dataset

    ds = load_dataset(str(deflection_release), "test", cache_dir=str(tmp_path), split="test")
    assert ds.num_rows == 6 and isinstance(ds[5]["images"][0], Image.Image)


def test_polars_reads_shards(deflection_release, store_and_shas):
    store, shas = store_and_shas
    frame = pl.read_parquet(str(deflection_release / "data" / "test-*.parquet"))
    assert frame.height == 6 and frame["shuffle_seed"].to_list() == [7] * 6
    first = frame["images"][0][0]
    assert first["path"] == store.path(shas[0]).name
    assert first["bytes"] == store.read(shas[0])
    assert open_release(deflection_release).frame("test").height == 6


def test_reflvqa_configs_load_with_datasets_and_polars(reflvqa_release, tmp_path):
    from datasets import load_dataset

    docs = load_dataset(
        "parquet",
        data_files={"test": str(reflvqa_release / "data" / "documents-*.parquet")},
        cache_dir=str(tmp_path),
        split="test",
    )
    assert docs["doc_id"] == ["d-text-1", "d-img-1"]
    assert docs[0]["image"] is None and isinstance(docs[1]["image"], Image.Image)
    qa = load_dataset(
        "parquet",
        data_files={"test": str(reflvqa_release / "data" / "qa-*.parquet")},
        cache_dir=str(tmp_path),
        split="test",
    )
    assert qa[0]["sentences"][0]["text_citations"] == ["d-text-1"]
    assert isinstance(qa[0]["images"][0], Image.Image)
    kb = pl.read_parquet(str(reflvqa_release / "data" / "knowledge_base-*.parquet"))
    assert kb.height == 3 and kb["image"][2]["bytes"]


def test_existing_version_is_refused(deflection_release, store_and_shas):
    store, shas = store_and_shas
    with pytest.raises(ReleaseExists, match="immutable"):
        write_release(b.deflection_draft(b.deflection_rows(shas)), deflection_release.parent.parent, store)


@pytest.mark.parametrize("version,parent", [("1.0.0", "1.0.0"), ("1.0.0", "1.2.0"), ("1.0", None)])
def test_version_must_be_semantic_and_newer_than_parent(tmp_path, store_and_shas, version, parent):
    store, shas = store_and_shas
    with pytest.raises(ReleaseError):
        write_release(b.deflection_draft(b.deflection_rows(shas), version=version, parent=parent), tmp_path, store)


def test_failure_mid_write_leaves_no_version(tmp_path, store_and_shas):
    """The last shard references an image missing from the store: the writer fails after
    writing earlier shards, and neither a version nor its temp dir remains."""
    store, shas = store_and_shas
    rows = b.deflection_rows(shas)
    rows[-1]["images"] = ["0" * 64]
    with pytest.raises(ReleaseError, match="missing from the store"):
        write_release(b.deflection_draft(rows), tmp_path, store, max_rows_per_shard=2)
    assert list((tmp_path / "deflectionbench").iterdir()) == []
    assert list_versions(tmp_path, "deflectionbench") == []


def test_leftover_temp_dir_is_invisible_and_harmless(tmp_path, deflection_release, store_and_shas):
    store, shas = store_and_shas
    crashed = tmp_path / "deflectionbench" / ".tmp-1.0.0-deadbeef"
    shutil.copytree(deflection_release, crashed)  # what a killed writer could leave behind
    assert list_versions(tmp_path, "deflectionbench") == []
    written = write_release(b.deflection_draft(b.deflection_rows(shas)), tmp_path, store)
    assert list_versions(tmp_path, "deflectionbench") == ["1.0.0"] and written.name == "1.0.0"


def test_staging_left_by_a_killed_writer_is_removed_by_the_next_write_and_said(tmp_path, store_and_shas, caplog):
    """Issue 42 item 11: ``kill -9`` during publish left ``.tmp-<version>-*`` forever. The next
    write into the folder removes a staging folder no live writer holds (the kernel dropped the
    killed writer's lock), says so, and never touches one a live writer holds."""
    import fcntl
    import logging
    import os
    import signal
    import subprocess
    import sys

    store, shas = store_and_shas
    folder = tmp_path / "deflectionbench"
    # a writer that holds its staging folder, killed with SIGKILL once it says where it writes
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time; from pathlib import Path; from mmcurate.releases.writer import _staging; "
                "temp, _ = _staging(Path(sys.argv[1]), '1.1.0'); (temp / 'data').mkdir(); print(temp.name, flush=True); "
                "time.sleep(600)"
            ),
            str(folder),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    killed = child.stdout.readline().strip()
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL and killed.startswith(".tmp-1.1.0-")
    live = folder / ".tmp-1.0.0-0a0b0c0d"
    live.mkdir()
    handle = os.open(live, os.O_RDONLY)
    fcntl.flock(handle, fcntl.LOCK_EX)  # as a writer in another process holds its staging folder
    try:
        with caplog.at_level(logging.WARNING, logger="mmcurate.releases.writer"):
            written = write_release(b.deflection_draft(b.deflection_rows(shas)), tmp_path, store)
    finally:
        os.close(handle)
    assert sorted(p.name for p in folder.iterdir()) == [".tmp-1.0.0-0a0b0c0d", "1.0.0"] and written == folder / "1.0.0"
    assert f"{folder}: removed 1 staging folder left by a killed write: {killed}" in caplog.text


def test_ledger_and_quarantine_round_trip(deflection_release):
    release = open_release(deflection_release)
    assert release.ledger.num_rows == 12
    assert release.quarantine.column("reason").to_pylist() == ["missing answer"] * 2
    assert isinstance(release.table("test"), pa.Table)


def _header(release) -> dict:
    return yaml.safe_load((release / "README.md").read_text().split("---")[1])


def test_each_benchmark_card_opens_with_its_own_description(deflection_release, reflvqa_release):
    deflection = (deflection_release / "README.md").read_text().split("---", 2)[2]
    reflvqa = (reflvqa_release / "README.md").read_text().split("---", 2)[2]
    assert deflection.index("VLM-DeflectionBench is a retrieval-dependent") < deflection.index("## Statistics")
    assert reflvqa.index("RefLVQA is a long-form visual question answering benchmark") < reflvqa.index("## Statistics")
    assert "VLM-DeflectionBench" not in reflvqa and "parametric memory" not in reflvqa


def test_card_splits_carry_num_bytes_so_datasets_takes_the_card(deflection_release, tmp_path, caplog):
    from datasets import load_dataset

    splits = _header(deflection_release)["dataset_info"][0]["splits"]
    assert splits[0]["num_bytes"] > 0 and splits[0]["num_examples"] == 6
    with caplog.at_level(logging.WARNING):
        assert load_dataset(str(deflection_release), "test", cache_dir=str(tmp_path), split="test").num_rows == 6
    assert "splits" not in caplog.text  # "The `splits` field in YAML is malformed or missing ..." before


def test_license_comes_from_the_sources(deflection_release, tmp_path, store_and_shas):
    header = _header(deflection_release)  # infoseek and webqa: terms not checked, so per source
    assert (header["license"], header["license_name"]) == ("other", "per-source terms")
    card = (deflection_release / "README.md").read_text()
    assert (
        "- infoseek: terms not checked by mmcurate, as stated at <https://github.com/open-vision-language/infoseek>"
        in card
    )
    store, shas = store_and_shas
    draft = b.deflection_draft(b.deflection_rows(shas, sources=("evqa",)))
    draft.counts = {**draft.counts, "per_source": {"evqa": 6}}
    only_evqa = write_release(draft, tmp_path, store)
    assert _header(only_evqa)["license"] == "cc-by-4.0" and "license_name" not in _header(only_evqa)


def test_a_release_of_scripted_models_says_so_at_the_top(deflection_release, tmp_path, store_and_shas):
    assert "Built with scripted models" not in (deflection_release / "README.md").read_text()
    store, shas = store_and_shas
    draft = b.deflection_draft(b.deflection_rows(shas))
    draft.models = [{**draft.models[0], "backend": "scripted", "model": "reader.jsonl"}]
    card = (write_release(draft, tmp_path, store) / "README.md").read_text().split("---", 2)[2]
    assert card.index("Built with scripted models") < card.index("## Statistics")


def test_counts_of_one_are_singular(tmp_path, store_and_shas):
    """ "1 sample", never "1 samples" or "1 sample(s)" (one helper: core.plural.counted)."""
    store, shas = store_and_shas
    rows = b.deflection_rows(shas)
    draft = b.deflection_draft(rows, version="1.1.0", parent="1.0.0")
    draft.k_min = 1
    draft.removed = [{"sample_id": "gone", "reason": "drop in v1.1.0", "removed_in": "1.1.0"}]
    draft.incomplete = {"held_out": 1, "failed_calls": {"smollm2": {"failed": 1, "calls": 4}}}
    dedup = StageResult(
        stage="dedup",
        kept=pa.table({"x": [1]}),
        counts={"flagged": 1, "dropped": 1},
        extra={"settings": {"drop": True}},
        components={"near_duplicates": "phash"},
    )
    draft.notes = [near_duplicate_note(dedup), Shortfall(1, {"smollm2": (1, 4)}).describe()]
    path = write_release(draft, tmp_path, store)
    card = (path / "README.md").read_text()
    assert "1 sample removed since then" in card and "1 sample held out by those errors" in card
    assert "at least 1 negative context per sample" in card and "6 rows in `test`" in card
    assert "1 sample flagged, 1 dropped" in card and "1 sample held out by errors" in card
    html = write_report(path).read_text()
    assert "1 sample held out by failed model calls" in html
    assert not re.search(r"\b1 samples\b|sample\(s\)", card + html)
