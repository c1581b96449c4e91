"""The Great Expectations suites: good releases pass, each rule fails on a crafted bad release."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import pytest

from mmcurate.releases.errors import ReleaseInvalid
from mmcurate.releases.verify import verify_release
from mmcurate.releases.writer import write_release
from tests.releases import release_builders as b
from tests.releases.cli_helpers import run_cli


def test_good_releases_pass_and_write_quality(deflection_release, reflvqa_release):
    for release in (deflection_release, reflvqa_release):
        results = json.loads((release / "quality" / "validation.json").read_text())
        assert results["success"] is True and results["failures"] == []
        index = (release / "quality" / "data_docs" / "index.html").read_text()
        assert "<html" in index.lower()
        assert list((release / "quality" / "data_docs").rglob("validations/**/*.html"))
    deflection = json.loads((deflection_release / "quality" / "validation.json").read_text())
    assert set(deflection["results"]) == {"test", "source_mix"}


def test_validate_command_rewrites_quality_and_release_still_verifies(
    capsys, monkeypatch, tmp_path, deflection_release
):
    import shutil

    release = tmp_path / "1.0.0"
    shutil.copytree(deflection_release, release)
    before = (release / "quality" / "validation.json").read_text()
    code, out, _ = run_cli(capsys, monkeypatch, "validate", str(release))
    assert code == 0 and "validation passed" in out
    assert (release / "quality" / "validation.json").read_text() != before  # new timestamp
    assert verify_release(release).ok


def _bad(rows, mutate):
    rows = copy.deepcopy(rows)
    mutate(rows)
    return rows


def _set(row, key, value):
    row[key] = value


CASES = {
    "too few negatives": (lambda r: _set(r[1], "negative_contexts", r[1]["negative_contexts"][:2]), "n_negatives"),
    "gold among negatives by id": (
        lambda r: r[2]["negative_contexts"].append(dict(r[2]["gold_contexts"][0])),
        "gold_in_negatives",
    ),
    "gold among negatives by text": (
        lambda r: r[2]["negative_contexts"].append(b.ctx("other-id", text=r[2]["gold_contexts"][0]["text"].upper())),
        "gold_in_negatives",
    ),
    "duplicate context": (
        lambda r: r[3]["negative_contexts"].append(dict(r[3]["negative_contexts"][0], context_id="copy")),
        "n_duplicate_contexts",
    ),
    "duplicate sample_id": (lambda r: _set(r[4], "sample_id", r[0]["sample_id"]), "expect_column_values_to_be_unique"),
    "empty question": (lambda r: _set(r[0], "question", "  "), "question_chars"),
    "no answers": (lambda r: _set(r[0], "answers", [""]), "n_answers"),
    "wrong shuffle seed": (lambda r: _set(r[5], "shuffle_seed", 8), "shuffle_seed"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_deflection_rule_fails(tmp_path, store_and_shas, case):
    store, shas = store_and_shas
    mutate, column = CASES[case]
    draft = b.deflection_draft(_bad(b.deflection_rows(shas), mutate))
    with pytest.raises(ReleaseInvalid) as info:
        write_release(draft, tmp_path, store)
    assert len(info.value.failures) == 1, info.value.failures
    assert column in info.value.failures[0]
    assert not (tmp_path / "deflectionbench" / "1.0.0").exists()
    assert list((tmp_path / "deflectionbench").iterdir()) == []


def test_undecodable_image_fails(tmp_path, store_and_shas):
    store, shas = store_and_shas
    rows = b.deflection_rows(shas)
    bad = b.put_corrupt_image(store)
    rows[2]["negative_contexts"][-1]["image"] = bad
    with pytest.raises(ReleaseInvalid) as info:
        write_release(b.deflection_draft(rows), tmp_path, store)
    assert ["images_decode" in f and rows[2]["sample_id"] in f for f in info.value.failures] == [True]


def test_source_mix_out_of_bounds_fails(tmp_path, store_and_shas):
    store, shas = store_and_shas
    draft = b.deflection_draft(b.deflection_rows(shas), source_mix={"infoseek": [0.6, 1.0], "webqa": [0.0, 0.4]})
    with pytest.raises(ReleaseInvalid) as info:
        write_release(draft, tmp_path, store)
    assert len(info.value.failures) == 1 and "source_mix" in info.value.failures[0]
    assert "infoseek" in info.value.failures[0] and "webqa" in info.value.failures[0]


def test_unset_k_min_and_source_mix_are_skipped_with_notes(tmp_path, store_and_shas):
    store, shas = store_and_shas
    rows = b.deflection_rows(shas)
    rows[0]["negative_contexts"] = rows[0]["negative_contexts"][:1]
    release = write_release(replace(b.deflection_draft(rows), k_min=None), tmp_path, store)
    notes = json.loads((release / "quality" / "validation.json").read_text())["notes"]
    assert any("k_min" in n for n in notes) and any("source_mix" in n for n in notes)


REFLVQA_CASES = {
    "citation of unknown document": (
        lambda t: t["qa"][0]["sentences"][0]["text_citations"].append("d-missing"),
        "n_missing_cited_docs",
    ),
    "fact-checkable sentence without citation": (
        lambda t: _set(t["qa"][1]["sentences"][0], "flagged", False),
        "n_unsupported_sentences",
    ),
    "duplicate sample_id": (lambda t: _set(t["qa"][1], "sample_id", t["qa"][0]["sample_id"]), "sample_id"),
    "empty answer": (lambda t: _set(t["qa"][1], "answer", ""), "answer_chars"),
}


@pytest.mark.parametrize("case", list(REFLVQA_CASES))
def test_each_reflvqa_rule_fails(tmp_path, store_and_shas, case):
    store, shas = store_and_shas
    mutate, column = REFLVQA_CASES[case]
    tables = b.reflvqa_tables(shas)
    mutate(tables)
    with pytest.raises(ReleaseInvalid) as info:
        write_release(b.reflvqa_draft(tables), tmp_path, store)
    assert len(info.value.failures) == 1 and info.value.failures[0].startswith("qa:")
    assert column in info.value.failures[0]


def test_reflvqa_undecodable_document_image_fails(tmp_path, store_and_shas):
    store, shas = store_and_shas
    tables = b.reflvqa_tables(shas)
    tables["documents"][1]["image"] = b.put_corrupt_image(store)
    with pytest.raises(ReleaseInvalid) as info:
        write_release(b.reflvqa_draft(tables), tmp_path, store)
    assert [f.split(":")[0] for f in info.value.failures] == ["documents"]
