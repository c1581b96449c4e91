"""verify, why and diff on written releases."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from mmcurate.core.ids import sha256_file
from mmcurate.core.ledger import Decision
from mmcurate.releases.diff import NOT_IN_LEDGER, diff_releases
from mmcurate.releases.errors import ReleaseError
from mmcurate.releases.reader import open_release
from mmcurate.releases.verify import verify_release
from mmcurate.releases.why import trace_sample
from mmcurate.releases.writer import write_release
from tests.releases import release_builders as b
from tests.releases.cli_helpers import run_cli


def test_untouched_release_verifies(capsys, monkeypatch, deflection_release):
    assert verify_release(deflection_release).ok
    code, out, _ = run_cli(capsys, monkeypatch, "verify", str(deflection_release))
    assert code == 0 and "ok:" in out


def test_tampered_shard_missing_and_extra_files_are_reported(capsys, monkeypatch, copy):
    shard = copy / "data" / "test-00001-of-00002.parquet"
    table = pq.read_table(shard)
    pq.write_table(table.slice(0, 1), shard)  # a still-valid Parquet file with a row removed
    (copy / "plots" / "funnel.png").unlink()
    (copy / "data" / "smuggled.parquet").write_bytes(b"x")
    result = verify_release(copy)
    assert result.mismatched == ["data/test-00001-of-00002.parquet"]
    assert result.missing == ["plots/funnel.png"]
    assert result.extra == ["data/smuggled.parquet"]
    code, out, _ = run_cli(capsys, monkeypatch, "verify", str(copy))
    assert code == 1
    assert "checksum mismatch: data/test-00001-of-00002.parquet" in out and "missing: plots/funnel.png" in out


def test_symbolic_links_in_a_release_fail_verify_and_are_never_published(capsys, monkeypatch, tmp_path, copy):
    """A sealed file swapped for a link to an identical copy outside the release, and a link to
    a folder outside it: verify fails naming both, publish refuses, and a copy never follows a
    link (issue 42 item 8)."""
    from mmcurate.releases.errors import ReleaseError
    from mmcurate.releases.publish import copy_release, publish, upload_plan

    plan = upload_plan(copy, "org/bench")  # planned while the release is clean
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not the release's")
    (outside / "README.md").write_bytes((copy / "README.md").read_bytes())
    (copy / "README.md").unlink()
    (copy / "README.md").symlink_to(outside / "README.md")
    (copy / "plots" / "etc").symlink_to(outside, target_is_directory=True)
    result = verify_release(copy)
    assert not result.ok
    assert f"symbolic link README.md -> {outside / 'README.md'}: a release holds no links" in result.problems()
    assert f"symbolic link plots/etc -> {outside}: a release holds no links" in result.problems()
    code, out, _ = run_cli(capsys, monkeypatch, "verify", str(copy))
    assert code == 1 and "symbolic link plots/etc" in out
    with pytest.raises(ReleaseError, match="does not verify: .*symbolic link README.md"):
        publish(copy, "org/bench", target_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with pytest.raises(ReleaseError, match="README.md goes through a symbolic link"):
        copy_release(plan, tmp_path / "copied")
    assert not (tmp_path / "copied" / "README.md").exists()


def test_post_seal_list_cannot_vouch_for_a_cut_shard(copy):
    """Cut a shard to fewer rows and write its new hash into quality/checksums.json: the
    manifest alone pins sealed files, so verify reports the shard, the list and the counts."""
    shard = copy / "data" / "test-00000-of-00002.parquet"
    pq.write_table(pq.read_table(shard).slice(0, 2), shard)
    listed = copy / "quality" / "checksums.json"
    entries = json.loads(listed.read_text())
    entries["data/test-00000-of-00002.parquet"] = {"sha256": sha256_file(shard), "size": shard.stat().st_size}
    listed.write_text(json.dumps(entries))
    result = verify_release(copy)
    assert not result.ok
    assert result.mismatched == ["data/test-00000-of-00002.parquet"]
    assert "quality/checksums.json lists sealed file data/test-00000-of-00002.parquet; only the manifest pins it" in (
        result.invalid
    )
    assert "config test: the manifest counts 6 rows, its shards hold 4" in result.invalid


def test_post_seal_list_cannot_add_files_outside_quality(copy):
    (copy / "data" / "extra.parquet").write_bytes(b"x")
    listed = copy / "quality" / "checksums.json"
    entries = json.loads(listed.read_text())
    entries["data/extra.parquet"] = {"sha256": "0" * 64, "size": 1}
    listed.write_text(json.dumps(entries))
    result = verify_release(copy)
    assert result.extra == ["data/extra.parquet"]
    assert "quality/checksums.json lists data/extra.parquet, which is not a post-seal file" in result.invalid


def test_a_manifest_without_files_or_with_an_edited_list_is_not_ok(capsys, monkeypatch, copy):
    path = copy / "manifest.json"
    manifest = json.loads(path.read_text())
    edited = {**manifest, "files": {**manifest["files"], "README.md": {"sha256": "0" * 64, "size": 1}}}
    path.write_text(json.dumps(edited))
    assert "the manifest's file list does not match its sealed digest" in verify_release(copy).invalid
    path.write_text(json.dumps({**manifest, "files": {}}))
    result = verify_release(copy)
    assert not result.ok and result.invalid == ["the manifest lists no files"]
    code, out, _ = run_cli(capsys, monkeypatch, "verify", str(copy))
    assert code == 1 and "the manifest lists no files" in out and "ok:" not in out
    path.write_text("{}")
    code, _, err = run_cli(capsys, monkeypatch, "verify", str(copy))
    assert code == 2 and err.count("\n") == 1 and "is not a release manifest" in err


def test_tampered_quality_results_are_reported(copy):
    path = copy / "quality" / "validation.json"
    path.write_text(path.read_text().replace('"success": true', '"success": false'))
    assert verify_release(copy).mismatched == ["quality/validation.json"]


def test_why_prints_trace(capsys, monkeypatch, deflection_release):
    release = open_release(deflection_release)
    sid = release.sample_ids[0]
    trace = trace_sample(release, sid)
    assert trace.in_release
    assert [(d["stage"], d["check"], d["model"], d["verdict"]) for d in trace.decisions] == [
        ("ingest", "schema_v1", None, "keep"),
        ("gating", "parametric_v1", "smollm2", "keep"),
    ]
    code, out, _ = run_cli(capsys, monkeypatch, "why", str(deflection_release), sid)
    assert code == 0
    assert f"{sid} is IN deflectionbench 1.0.0" in out and "gating/parametric_v1 model=smollm2: keep" in out


def test_why_unknown_sample_is_one_line_error(capsys, monkeypatch, deflection_release):
    with pytest.raises(ReleaseError, match="unknown sample id"):
        trace_sample(open_release(deflection_release), "nope")
    code, _, err = run_cli(capsys, monkeypatch, "why", str(deflection_release), "nope")
    assert code == 2 and err.count("\n") == 1 and "unknown sample id 'nope'" in err


def test_diff_lists_added_and_removed_with_reasons(capsys, monkeypatch, tmp_path, deflection_release, store_and_shas):
    store, shas = store_and_shas
    old_rows = b.deflection_rows(shas)
    new_rows = old_rows[2:] + b.deflection_rows(shas, n=8)[6:]
    dropped, silent = old_rows[0]["sample_id"], old_rows[1]["sample_id"]
    decisions = b.decisions_for(old_rows, dropped={dropped: "qwen2.5-vl"})
    draft = b.deflection_draft(new_rows, version="1.1.0", parent="1.0.0", decisions=decisions)

    from_draft = diff_releases(deflection_release, draft)
    assert from_draft.removed_records() == [
        {
            "sample_id": dropped,
            "reason": "gating/parametric_v1: drop by qwen2.5-vl in v1.1.0 (answered correctly)",
            "removed_in": "1.1.0",
        },
        {"sample_id": silent, "reason": NOT_IN_LEDGER, "removed_in": "1.1.0"},
    ]
    draft.removed = from_draft.removed_records()
    new = write_release(draft, tmp_path, store)
    result = diff_releases(deflection_release, new)
    assert result.added == [r["sample_id"] for r in new_rows[-2:]]
    assert [r.sample_id for r in result.removed] == [dropped, silent]
    assert open_release(new).manifest.removed == draft.removed
    code, out, _ = run_cli(capsys, monkeypatch, "diff", str(deflection_release), str(new))
    assert code == 0
    assert "1.0.0 -> 1.1.0: +2 added, -2 removed" in out
    assert f"- {dropped}: gating/parametric_v1: drop by qwen2.5-vl in v1.1.0" in out
    assert f"- {silent}: {NOT_IN_LEDGER}" in out


def test_diff_shows_changed_samples_and_names_the_deciding_model(
    capsys, monkeypatch, tmp_path, deflection_release, store_and_shas
):
    """Issue 31 items 16 and 19: ``diff`` said "+0 added, -1 removed" while the CHANGELOG listed
    samples whose negatives changed; it now shows each changed sample, its fields and the stage
    that changed it. A drop decided by one model and graded by another names the deciding model
    ("drop by lexical" where smollm2-warm answered)."""
    from dataclasses import replace

    store, shas = store_and_shas
    old_rows = b.deflection_rows(shas)
    changed = {**old_rows[3], "negative_contexts": old_rows[3]["negative_contexts"][1:]}
    new_rows = [*old_rows[1:3], changed, *old_rows[4:]]
    dropped, touched = old_rows[0]["sample_id"], changed["sample_id"]
    decisions = [
        *b.decisions_for(new_rows),
        Decision(
            dropped,
            "necessity",
            "necessity.rule.v1",
            "drop",
            model="lexical",
            detail={"reason": "answerable without the image", "deciding_model": "smollm2-warm"},
        ),
        Decision(
            touched,
            "oracle",
            "oracle.distractor.v1",
            "remove",
            model="qwen2.5-vl",
            context_id=old_rows[3]["negative_contexts"][0]["context_id"],
            detail={"reason": "answered with it alone"},
        ),
    ]
    draft = b.deflection_draft(new_rows, version="1.1.0", parent="1.0.0", decisions=decisions)
    draft = replace(draft, counts={**draft.counts, "run_id": "run-1.1.0"})
    result = diff_releases(deflection_release, draft)
    [removal] = result.removed
    assert (
        removal.reason
        == (
            "necessity/necessity.rule.v1: drop by smollm2-warm (graded by lexical) in v1.1.0 "
            "(answerable without the image)"
        )
        and removal.model == "smollm2-warm"
    )
    [change] = result.changed
    assert (change.sample_id, change.fields, change.stages, change.models) == (
        touched,
        ["negative_contexts"],
        ["oracle"],
        ["qwen2.5-vl"],
    )
    draft.removed = result.removed_records()
    new = write_release(draft, tmp_path, store)
    code, out, _ = run_cli(capsys, monkeypatch, "diff", str(deflection_release), str(new))
    assert code == 0 and "1.0.0 -> 1.1.0: +0 added, -1 removed, ~1 changed" in out
    assert (
        f"~ {touched}: negative_contexts (changed by oracle); oracle/oracle.distractor.v1: remove by qwen2.5-vl "
        f"on context neg-3-0 in v1.1.0 (answered with it alone)"
    ) in out
    assert f"- {dropped}: necessity/necessity.rule.v1: drop by smollm2-warm (graded by lexical)" in out
