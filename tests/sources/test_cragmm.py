"""CRAG-MM adapter on the bundled fixture in the Hub layout: one sample per turn, the labels
by name, images embedded or from the download cache, bad conversations quarantined whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmcurate.core.errors import SourceError
from mmcurate.sources.ingest import ingest

SOURCE = "cragmm"


def test_turns_become_samples_with_their_labels(result, rows) -> None:
    got = rows(result)
    assert (result.samples, result.quarantined) == (6 + 7, 5)
    cat = got["st-cat-t0"]
    assert cat["question"] == "what animal is this?" and cat["answers"] == ["This is a tabby cat."]
    assert cat["meta"] == {
        "set": "single_turn",
        "session_id": "st-cat",
        "turn": 0,
        "turns": 1,
        "interaction_id": "st-cat-t0",
        "domain": "animal",
        "query_category": "simple-recognition",
        "dynamism": "static",
        "image_quality": "normal",
        "egocentric": True,
        "image_url": None,
        "split": "validation",
    }
    second = got["mt-astronaut-t1"]["meta"]
    assert (second["set"], second["turn"], second["turns"], second["domain"]) == (
        "multi_turn",
        1,
        3,
        "math and science",
    )
    assert got["mt-astronaut-t0"]["images"] == got["mt-astronaut-t2"]["images"]  # one image per conversation
    assert got["st-coins-t0"]["meta"]["dynamism"] == "real-time"


def test_an_image_by_url_comes_from_the_download_cache(result, rows) -> None:
    pavilion = rows(result)["st-pavilion-t0"]
    assert pavilion["meta"]["egocentric"] is False and pavilion["meta"]["image_url"].endswith("Example_pavilion.jpg")
    assert len(pavilion["images"]) == 1


def test_bad_conversations_are_quarantined_whole(result, quarantine_of) -> None:
    reasons = dict(quarantine_of(result))
    single = "crag-mm-single-turn-public/data/validation-00000-of-00001.parquet"
    multi = "crag-mm-multi-turn-public/data/validation-00000-of-00001.parquet"
    assert reasons[f"{single}:6"] == "conversation st-bad-answer: turn 0 (st-bad-answer-t0) has no answer"
    assert reasons[f"{single}:7"].startswith("conversation st-bad-image: image:")
    assert reasons[f"{single}:8"].startswith("conversation st-bad-url: image only by URL and not in the image cache")
    assert reasons[f"{single}:9"] == "conversation st-bad-domain: domain code 41 is not one of the 13 labels"
    assert reasons[f"{multi}:3"] == "conversation mt-bad-query: turn 1 (mt-bad-query-t1) has an empty query"


def test_the_good_first_turn_of_a_bad_conversation_is_not_kept(result, samples_of) -> None:
    assert not [sid for sid in samples_of(result) if sid.startswith("mt-bad-query")]


def test_the_older_list_of_records_layout_reads_the_same(tmp_path: Path, builder) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    row = builder._row(*builder.SINGLE_ROWS[0])
    turns, answers = row["turns"], row["answers"]
    row["turns"] = [{k: v[0] for k, v in turns.items()}]
    row["answers"] = [{k: v[0] for k, v in answers.items()}]
    shard = tmp_path / "raw" / "crag-mm-single-turn-public" / "data" / "validation-00000-of-00001.parquet"
    shard.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([row]), shard)
    out = ingest(SOURCE, tmp_path / "raw", tmp_path / "out")
    assert (out.samples, out.quarantined) == (1, 0)


def test_a_shard_of_unknown_set_needs_the_option(tmp_path: Path, root: Path) -> None:
    raw = tmp_path / "raw" / "data"
    raw.mkdir(parents=True)
    (raw / "validation-00000-of-00001.parquet").write_bytes(
        (root / "crag-mm-multi-turn-public/data/validation-00000-of-00001.parquet").read_bytes()
    )
    with pytest.raises(SourceError, match="single- or multi-turn"):
        ingest(SOURCE, tmp_path / "raw", tmp_path / "out")
    out = ingest(SOURCE, tmp_path / "raw", tmp_path / "out2", options={"set": "multi_turn"})
    assert out.samples == 7


def test_label_names_come_from_the_shards_class_labels(tmp_path: Path, builder, rows, quarantine_of) -> None:
    # the shard's ClassLabels list the domains shifted by one: code 5 is "vehicle" here but "local"
    # in the published order, code 12 "animal" here but "math and science"; the shard's names decide
    shard = tmp_path / "raw" / "crag-mm-single-turn-public" / "data" / "validation-00000-of-00001.parquet"
    builder.relabelled_shard(shard)
    out = ingest(SOURCE, tmp_path / "raw", tmp_path / "out")
    got = rows(out)
    assert got["st-rocket-t0"]["meta"]["domain"] == "vehicle" and got["st-cat-t0"]["meta"]["domain"] == "animal"
    assert got["st-rocket-t0"]["meta"]["image_quality"] == "blurred"  # the other labels' names, from the shard too
    label = "crag-mm-single-turn-public/data/validation-00000-of-00001.parquet"
    assert dict(quarantine_of(out)) == {
        f"{label}:2": "conversation st-past: domain code 13 is not one of the 13 labels"
    }


def test_the_published_names_serve_a_shard_without_features(builder) -> None:
    from mmcurate.sources.cragmm import DOMAINS, label_names

    plain = builder.SCHEMA.remove_metadata()
    assert label_names(plain)["domain"] == DOMAINS
    assert label_names(builder.features(domains=builder.RELABELLED).arrow_schema)["domain"] == builder.RELABELLED


def test_image_quality_on_the_conversation(tmp_path: Path, builder, rows) -> None:
    shard = tmp_path / "raw" / "crag-mm-multi-turn-public" / "data" / "validation-00000-of-00001.parquet"
    builder.conversation_quality_shard(shard)
    got = rows(ingest(SOURCE, tmp_path / "raw", tmp_path / "out"))
    assert [got[f"mt-quality-t{n}"]["meta"]["image_quality"] for n in (0, 1)] == ["blurred", "blurred"]


def test_a_label_stored_by_name_must_be_a_name() -> None:
    from mmcurate.sources.cragmm import DOMAINS, _label

    assert _label("food", "domain", DOMAINS) == "food" and _label(9, "domain", DOMAINS) == "food"
    with pytest.raises(ValueError, match="domain 'engines' is not one of the 13 labels"):
        _label("engines", "domain", DOMAINS)
