"""What verify reports (issue 22, items 6 and 11): a damaged checksums list is a failed
verification (exit 1) naming the file, never a usage error."""
from __future__ import annotations

import shutil

import pytest
from cli_helpers import run_cli

from mmcurate.releases.verify import verify_release


@pytest.fixture
def copy(tmp_path, deflection_release):
    target = tmp_path / "1.0.0"
    shutil.copytree(deflection_release, target)
    return target


def test_a_corrupt_checksums_file_fails_verification(capsys, monkeypatch, copy):
    (copy / "quality" / "checksums.json").write_text("{not json")
    result = verify_release(copy)
    assert not result.ok and any("quality/checksums.json is not valid JSON" in p for p in result.problems())
    code, out, err = run_cli(capsys, monkeypatch, "verify", str(copy))
    assert code == 1 and "quality/checksums.json is not valid JSON" in out and "Traceback" not in err
