"""What verify reports (issue 22, items 6 and 11): a damaged checksums list is a failed
verification (exit 1) naming the file, never a usage error."""

from __future__ import annotations

import pytest

from mmcurate.releases.verify import verify_release
from tests.releases.cli_helpers import run_cli


def test_a_corrupt_checksums_file_fails_verification(capsys, monkeypatch, copy):
    (copy / "quality" / "checksums.json").write_text("{not json")
    result = verify_release(copy)
    assert not result.ok and any("quality/checksums.json is not valid JSON" in p for p in result.problems())
    code, out, err = run_cli(capsys, monkeypatch, "verify", str(copy))
    assert code == 1 and "quality/checksums.json is not valid JSON" in out and "Traceback" not in err


@pytest.mark.parametrize(
    "entry, edit",
    [
        ("models", lambda m: m["models"][0].update(name="a-stronger-model")),
        ("incomplete", lambda m: m.update(incomplete=None if m["incomplete"] else {"held_out": 0})),
        ("notes", lambda m: m["notes"].clear()),
        ("config", lambda m: m["config"]["deflectionbench"].update(k_min=1)),
        ("counts", lambda m: m["counts"]["per_stage"].update(ingest=10**6)),
        ("statistics", lambda m: m["statistics"]["global"][0].update(samples=999)),
    ],
)
def test_an_edited_manifest_entry_fails_verification_and_publishing(capsys, monkeypatch, copy, tmp_path, entry, edit):
    import json

    path = copy / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest, indent=2))
    result = verify_release(copy)
    assert f"manifest.json: {entry} edited after sealing" in result.invalid
    code, out, _ = run_cli(capsys, monkeypatch, "verify", str(copy))
    assert code == 1 and f"manifest.json: {entry} edited after sealing" in out
    code, _, err = run_cli(
        capsys, monkeypatch, "publish", str(copy), "--repo-id", "org/b", "--target-dir", str(tmp_path / "out")
    )
    assert code == 2 and "does not verify" in err and not (tmp_path / "out").exists()


def test_added_and_removed_entries_are_named(copy):
    import json

    path = copy / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["approved_by"] = "nobody"
    del manifest["removed"]
    path.write_text(json.dumps(manifest))
    assert verify_release(copy).invalid == [
        "manifest.json: approved_by added after sealing",
        "manifest.json: removed removed after sealing",
    ]


def test_counts_are_checked_against_the_data_even_when_the_seal_is_redone(copy):
    """Rewrite the per-source counts and their seal together: the data still contradicts them."""
    import json

    from mmcurate.releases.manifest import BODY_SEAL, body_digests

    path = copy / "manifest.json"
    manifest = json.loads(path.read_text())
    per_source = manifest["counts"]["per_source"]
    source = sorted(per_source)[0]
    if isinstance(per_source[source], dict):  # {"ingested": ..., "retained": ...}, as the flow writes it
        per_source[source]["retained"] += 5
    else:
        per_source[source] += 5
    manifest[BODY_SEAL] = body_digests(manifest)
    path.write_text(json.dumps(manifest))
    result = verify_release(copy)
    [problem] = result.invalid
    assert problem.startswith("counts.per_source: the manifest counts ") and f"released {source} samples" in problem


def test_a_format_1_manifest_verifies_its_files_and_says_its_body_is_not_sealed(capsys, monkeypatch, copy):
    import json

    from mmcurate.releases.manifest import BODY_SEAL

    path = copy / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest[BODY_SEAL]
    manifest["format"] = 1
    path.write_text(json.dumps(manifest))
    result = verify_release(copy)
    assert result.ok and result.notes == [
        "manifest.json is format 1: its files are sealed, its own entries (config, counts, notes, ...) are not",
        "manifest.json is format 1: written before releases carried the manifest's schema (manifest.schema.json)",
    ]
    code, out, _ = run_cli(capsys, monkeypatch, "verify", str(copy))
    assert code == 0 and out.startswith("note: manifest.json is format 1")
