"""``mmcurate ingest``: every source in --help, and adapter options from the command line
(``--option KEY=VALUE``), checked against the adapter's options before anything is read."""

from __future__ import annotations

import json
import shutil

import pytest

from mmcurate.core.errors import ConfigError
from mmcurate.sources import adapter_paths, command_line_options
from tests.releases.cli_helpers import one_line, run_cli


def test_help_lists_every_source(capsys, monkeypatch) -> None:
    code, out, _ = run_cli(capsys, monkeypatch, "ingest", "--help")
    flat = " ".join(out.replace("│", " ").split())
    assert code == 0 and all(name in flat for name in ("cragmm", "pope", "pope_objects", "mme", "reddit", "fire"))
    assert f"one of {', '.join(adapter_paths())}" in flat


def test_options_are_read_as_yaml_and_checked_by_name() -> None:
    assert command_line_options("pope_objects", ["sample_num=2", "splits=[random, popular]", "dataset=coco"]) == {
        "sample_num": 2,
        "splits": ["random", "popular"],
        "dataset": "coco",
    }
    with pytest.raises(ConfigError, match=r"--option sets: not an option of cragmm \(its options: set\)"):
        command_line_options("cragmm", ["sets=multi_turn"])
    with pytest.raises(ConfigError, match="write KEY=VALUE"):
        command_line_options("cragmm", ["multi_turn"])


def test_a_local_copy_of_the_hubs_folders_needs_the_set(capsys, monkeypatch, fixtures_root, tmp_path) -> None:
    # a shard copied out of its crag-mm-multi-turn-public folder: its set must be given
    raw = tmp_path / "raw" / "data"
    raw.mkdir(parents=True)
    shutil.copy(
        fixtures_root / "cragmm" / "crag-mm-multi-turn-public" / "data" / "validation-00000-of-00001.parquet", raw
    )
    code, _, err = run_cli(capsys, monkeypatch, "ingest", "cragmm", str(tmp_path / "raw"), "--out", str(tmp_path / "a"))
    one_line(code, err, "single- or multi-turn", "--option set=single_turn|multi_turn")
    code, out, err = run_cli(
        capsys,
        monkeypatch,
        "ingest",
        "cragmm",
        str(tmp_path / "raw"),
        "--out",
        str(tmp_path / "b"),
        "--option",
        "set=multi_turn",
    )
    assert code == 0, err
    assert json.loads((tmp_path / "b" / "ingest.json").read_text())["samples"] == 7
    code, _, err = run_cli(
        capsys,
        monkeypatch,
        "ingest",
        "cragmm",
        str(tmp_path / "raw"),
        "--out",
        str(tmp_path / "c"),
        "--option",
        "sets=multi_turn",
    )
    one_line(code, err, "--option sets: not an option of cragmm (its options: set)")
    code, _, err = run_cli(
        capsys,
        monkeypatch,
        "ingest",
        "cragmm",
        str(tmp_path / "raw"),
        "--out",
        str(tmp_path / "d"),
        "--option",
        "set=both",
    )
    one_line(code, err, "cragmm option set")
