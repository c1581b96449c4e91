"""WebQA adapter and the streaming JSON-object reader, on the bundled fixture format."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmcurate.core.errors import ConfigError, SourceError
from mmcurate.sources.ingest import ingest
from mmcurate.sources.json_members import JsonMembersError, iter_members
from mmcurate.sources.webqa import strip_quotes

SOURCE = "webqa"
FILE = "WebQA_train_val.json"


@pytest.fixture(scope="module")
def guid(builder) -> list[str]:
    return [builder.guid(n) for n in range(32)]


def quarantine_rows(result) -> list[dict]:
    return pq.read_table(result.quarantine_path).to_pylist()


def tsv_jpeg(root: Path, image_id: int) -> bytes:
    for line in (root / "imgs.tsv").read_text().splitlines():
        found, payload = line.split("\t")
        if found == str(image_id):
            return base64.b64decode(payload)
    raise KeyError(image_id)


# ---- json_members -------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(
    obj=st.dictionaries(st.text(max_size=8), json_values, max_size=6),
    chunk=st.integers(1, 40),
    indent=st.sampled_from([None, 1]),
)
def test_members_match_json_load_for_any_chunk_size(tmp_path_factory, obj, chunk, indent) -> None:
    path = tmp_path_factory.mktemp("json") / "obj.json"
    path.write_text(json.dumps(obj, indent=indent, ensure_ascii=False), encoding="utf-8")
    assert list(iter_members(path, chunk=chunk)) == list(obj.items())


def test_members_numbers_split_across_chunks_and_multibyte_text(tmp_path: Path) -> None:
    path = tmp_path / "obj.json"
    path.write_text('{"a": 1234567890, "b": "caf\u00e9 \u2603", "c": [1.5e10, true]}', encoding="utf-8")
    assert dict(iter_members(path, chunk=2)) == {"a": 1234567890, "b": "caf\u00e9 \u2603", "c": [1.5e10, True]}


def test_members_before_a_malformed_value_are_yielded_then_error(tmp_path: Path) -> None:
    path = tmp_path / "obj.json"
    path.write_text('{"ok": {"x": 1}, "bad": {"x": tru}, "never": 2}')
    members = iter_members(path, chunk=4)
    assert next(members) == ("ok", {"x": 1})
    with pytest.raises(JsonMembersError, match="invalid JSON value") as err:
        next(members)
    assert err.value.offset == 30


@pytest.mark.parametrize(
    "text, message",
    [
        ("[1, 2]", "expected '{'"),
        ('{"a": 1 "b": 2}', "expected ',' or '}'"),
        ('{"a": 1} {"b": 2}', "unexpected data after"),
        ('{"a": 1, ', "expected a member name"),
    ],
)
def test_members_reject_non_objects(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "obj.json"
    path.write_text(text)
    with pytest.raises(JsonMembersError, match=message):
        list(iter_members(path))


def test_members_of_empty_object(tmp_path: Path) -> None:
    path = tmp_path / "obj.json"
    path.write_text(" {\n} \n")
    assert list(iter_members(path)) == []


# ---- adapter ------------------------------------------------------------------------


def test_strip_quotes() -> None:
    assert strip_quotes('"What is it?"') == "What is it?"
    assert strip_quotes(' "white" ') == "white"
    assert strip_quotes('He said "hi"') == 'He said "hi"'
    assert strip_quotes('"') == '"'


def test_default_run_counts(result, samples_of, guid) -> None:
    assert (result.samples, result.quarantined) == (12, 7)
    assert set(samples_of(result)) == set(guid[:12])


def test_quarantine_rows_name_fact_and_reason(result, root: Path, guid) -> None:
    rows = quarantine_rows(result)
    assert all(r["source"] == "webqa" for r in rows)
    got = [(r["locator"], r["reason"]) for r in rows]
    size = (root / "imgs.tsv").stat().st_size
    offsets = [int(x) for x in (root / "imgs.lineidx").read_text().split()]
    assert got[0] == (
        f"{FILE}:{guid[0]}",
        f"dropped img_negFacts[3]: imgs.lineidx offset {size + 4096} for "
        f"image_id 30000020 points past imgs.tsv ({size} bytes)",
    )
    assert got[1][0] == f"{FILE}:{guid[1]}"
    assert got[1][1].startswith("dropped img_negFacts[3]: image_id 30000021: undecodable image")
    assert got[2] == (
        f"{FILE}:{guid[2]}",
        f"dropped img_negFacts[3]: imgs.tsv row at offset {offsets[23]} holds image_id 30000023, expected 30000022",
    )
    assert got[3][0] == f"{FILE}:{guid[20]}"
    assert got[3][1].startswith("dropped img_posFacts[0]: image_id 30000021: undecodable image")
    assert got[4] == (f"{FILE}:{guid[20]}", "no usable gold fact (txt_posFacts/img_posFacts)")
    assert got[5] == (f"{FILE}:{guid[21]}", "missing field Q")
    assert got[6] == (f"{FILE}:{guid[22]}", "record is a str, not an object")
    assert json.loads(rows[0]["raw"])["image_id"] == 30000020


def test_quotes_stripped_from_question_and_answers(result, samples_of, guid) -> None:
    samples = samples_of(result)
    first = samples[guid[0]]
    assert first["question"] == "What color is the spacesuit Eileen Collins wears in her official portrait?"
    assert first["answers"] == ["white"]
    unwrapped = samples[guid[4]]  # published without quotes: left as is
    assert unwrapped["question"] == "Which city is home to the Forbidden City palace complex?"
    assert unwrapped["answers"] == ["Beijing"]
    assert all(s["images"] == [] for s in samples.values())


def test_image_gold_context_decoded_from_tsv(result, root: Path, samples_of, guid) -> None:
    first = samples_of(result)[guid[0]]
    (gold,) = first["gold_contexts"]
    jpeg = tsv_jpeg(root, 30000000)
    assert gold == {
        "context_id": "webqa:img:30000000",
        "modality": "image",
        "text": "Astronaut Eileen Collins poses in a white spacesuit beside the American flag.",
        "image": hashlib.sha256(jpeg).hexdigest(),
        "title": "Eileen Collins official portrait",
    }
    stored = next((result.images_dir / gold["image"][:2]).glob(f"{gold['image']}.*"))
    assert stored.read_bytes() == jpeg


def test_text_gold_and_negatives(result, samples_of, guid) -> None:
    hubble = samples_of(result)[guid[3]]
    assert hubble["gold_contexts"] == [
        {
            "context_id": f"webqa:txt:{guid[3][:24]}_0",
            "modality": "text",
            "image": None,
            "text": "The Hubble Space Telescope was launched into low Earth orbit in 1990 and remains in operation.",
            "title": "Hubble Space Telescope",
        }
    ]
    negatives = hubble["negative_contexts"]
    assert [c["modality"] for c in negatives] == ["text"] * 4 + ["image"] * 3
    assert all(c["context_id"].startswith("webqa:txt:") for c in negatives[:4])
    assert all(c["context_id"].startswith("webqa:img:300000") and c["image"] for c in negatives[4:])


def test_broken_negative_dropped_but_sample_kept(result, samples_of, guid) -> None:
    samples = samples_of(result)
    for n, bad in ((0, 30000020), (1, 30000021), (2, 30000022)):
        ids = [c["context_id"] for c in samples[guid[n]]["negative_contexts"]]
        assert len(ids) == 7 and f"webqa:img:{bad}" not in ids
        assert "dropped_gold" not in json.loads(samples[guid[n]]["meta"])


def test_every_good_sample_has_six_negatives_and_answer_in_gold(result, samples_of) -> None:
    for sample in samples_of(result).values():
        assert len(sample["negative_contexts"]) >= 6
        gold_text = " ".join(c["text"] for c in sample["gold_contexts"]).lower()
        assert any(a.lower() in gold_text for a in sample["answers"]), sample["question"]


def test_meta(result, samples_of, guid) -> None:
    samples = samples_of(result)
    assert json.loads(samples[guid[0]]["meta"]) == {
        "Qcate": "color",
        "topic": "space",
        "split": "train",
        "Keywords_A": "white",
    }
    assert json.loads(samples[guid[3]]["meta"])["split"] == "val"


NOT_OBJECT = (22, "record is a str, not an object")


@pytest.mark.parametrize(
    "options, expected, quarantined",
    [
        ({"splits": ["val"]}, {3, 11}, [NOT_OBJECT]),
        ({"qcate": ["number"]}, {3, 10}, [20, 20, NOT_OBJECT]),  # guid[20] is a number question too
    ],
)
def test_split_and_qcate_filters(
    root: Path, tmp_path: Path, options: dict, expected: set, quarantined: list, guid, samples_of, quarantine_of
) -> None:
    """Records are named by guid index; a bare index checks the locator only, a pair the reason too."""
    expected = {guid[n] for n in expected}
    quarantined = [(f"{FILE}:{guid[q[0]]}", q[1]) if isinstance(q, tuple) else f"{FILE}:{guid[q]}" for q in quarantined]
    result = ingest("webqa", root, tmp_path, options=options)
    assert set(samples_of(result)) == expected
    # records outside the filters are out of scope, not quarantined; bad records in scope are
    rows = quarantine_of(result)
    assert [row if isinstance(q, tuple) else row[0] for row, q in zip(rows, quarantined)] == quarantined
    assert len(rows) == len(quarantined)


def test_include_test_ingests_unlabelled_samples(root: Path, tmp_path: Path, samples_of, guid) -> None:
    result = ingest("webqa", root, tmp_path, options={"include_test": True})
    samples = samples_of(result)
    assert result.samples == 14
    test = samples[guid[30]]
    assert test["question"] == "What colour are the roofs of the Summer Palace pavilion?"
    assert (test["answers"], test["gold_contexts"], test["negative_contexts"]) == ([], [], [])
    meta = json.loads(test["meta"])
    assert meta["split"] == "test"
    assert [c["context_id"] for c in meta["candidate_contexts"]] == [
        f"webqa:txt:{guid[30][:24]}_0",
        "webqa:img:30000011",
        "webqa:img:30000003",
    ]
    assert str(root / "WebQA_test.json") in result.source_files


def test_unknown_option_and_missing_files(root: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="webqa option qcates"):
        ingest("webqa", root, tmp_path / "a", options={"qcates": ["number"]})
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / FILE).write_text("{}")
    with pytest.raises(SourceError, match="imgs.tsv"):
        ingest("webqa", bare, tmp_path / "b")


def test_truncated_json_file_quarantines_the_rest(root: Path, tmp_path: Path, guid) -> None:
    cut = tmp_path / "cut"
    cut.mkdir()
    for name in ("imgs.tsv", "imgs.lineidx"):
        (cut / name).write_bytes((root / name).read_bytes())
    text = (root / FILE).read_text()
    (cut / FILE).write_text(text[: text.index(guid[5]) + 200])  # cut inside the 6th record
    result = ingest("webqa", cut, tmp_path / "out")
    assert result.samples == 5
    (last,) = [r for r in quarantine_rows(result) if r["locator"].startswith(f"{FILE}:char")]
    assert last["reason"].startswith("malformed JSON, rest of file unreadable")


def test_samples_round_trip_through_datasets_and_polars(result, monkeypatch: pytest.MonkeyPatch, guid) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import datasets

    loaded = datasets.load_dataset(
        "parquet", data_files=str(result.samples_path), split="train", cache_dir=str(result.out / "hf_cache")
    )
    frame = pl.read_parquet(result.samples_path)
    assert len(loaded) == frame.height == 12
    first = frame.filter(pl.col("source_id") == guid[0]).row(0, named=True)
    from_hf = next(r for r in loaded if r["source_id"] == guid[0])
    assert from_hf["gold_contexts"] == first["gold_contexts"]
    assert from_hf["negative_contexts"] == first["negative_contexts"]
    assert from_hf["answers"] == first["answers"] == ["white"]


def test_cli_ingest(root: Path, tmp_path: Path) -> None:
    cli = Path(sys.executable).with_name("mmcurate")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [str(cli), "ingest", "webqa", str(root), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "webqa: 12 samples" in done.stdout and "7 quarantined" in done.stdout
    assert pq.read_table(tmp_path / "samples.parquet").num_rows == 12
    assert json.loads((tmp_path / "ingest.json").read_text())["quarantined"] == 7
