"""The ingest driver and its command line: unusable output and image folders are one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mmcurate.core.errors import MmcurateError, SourceError
from mmcurate.sources.ingest import ingest
from tests.releases.cli_helpers import one_line, run_cli

MMCURATE = Path(sys.executable).with_name("mmcurate")
ENV = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(MMCURATE), "ingest", *args], capture_output=True, text=True, env=ENV, timeout=300)


@pytest.mark.parametrize("source", ["viquae", "infoseek", "evqa", "mmdocrag", "reddit"])
def test_missing_image_folder_is_an_error_not_quarantine(fixtures_root: Path, tmp_path: Path, source: str) -> None:
    with pytest.raises(SourceError, match=f"{source}: image folder .*nonexistent is not a readable directory"):
        ingest(source, fixtures_root / source, tmp_path / "out", images=tmp_path / "nonexistent")
    assert not (tmp_path / "out" / "quarantine.parquet").exists()


def test_output_onto_a_file_is_an_error(fixtures_root: Path, tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("not a folder")
    with pytest.raises(MmcurateError, match="cannot use .*taken as the output folder"):
        ingest("viquae", fixtures_root / "viquae", tmp_path / "taken")
    with pytest.raises(MmcurateError, match="cannot use .*taken/out as the output folder"):
        ingest("viquae", fixtures_root / "viquae", tmp_path / "taken" / "out")


def test_cli_prints_one_line_and_fails(fixtures_root: Path, tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("not a folder")
    for args, message in (
        (
            ["viquae", str(fixtures_root / "viquae"), "--out", str(tmp_path / "o"), "--images", "/nonexistent"],
            "mmcurate: error: viquae: image folder /nonexistent is not a readable directory",
        ),
        (
            ["viquae", str(fixtures_root / "viquae"), "--out", str(tmp_path / "taken")],
            f"mmcurate: error: cannot use {tmp_path / 'taken'} as the output folder: File exists",
        ),
    ):
        done = cli(*args)
        assert done.returncode == 2
        assert done.stderr.strip() == message
        assert not (tmp_path / "o" / "quarantine.parquet").exists()


def test_an_out_holding_another_sources_ingest_is_refused(
    fixtures_root: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    """``ingest infoseek SRC --out ing/viquae`` would replace the ViQuAE samples and leave its
    images among the new ones: refused, the earlier ingest untouched (issue 42 item 9)."""
    out = tmp_path / "ing" / "viquae"
    first = ingest("viquae", fixtures_root / "viquae", out)
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(
        MmcurateError,
        match=f"{out} holds an ingest of viquae .*: write the infoseek ingest to another --out, or remove",
    ):
        ingest("infoseek", fixtures_root / "infoseek", out)
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert json.loads((out / "ingest.json").read_text())["samples"] == first.samples
    code, _, err = run_cli(
        capsys, monkeypatch, "ingest", "infoseek", str(fixtures_root / "infoseek"), "--out", str(out)
    )
    one_line(code, err, f"{out} holds an ingest of viquae")
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert ingest("viquae", fixtures_root / "viquae", out).samples == first.samples  # the same source: redone
