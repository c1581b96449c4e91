"""The Reddit (RefLVQA) adapter: each rule alone, then the bundled fixture end to end."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
import zstandard

from mmcurate.core.errors import ConfigError, SourceError
from mmcurate.core.ids import sha256_file
from mmcurate.core.images import ImageStore
from mmcurate.core.records import Rejected, Sample
from mmcurate.sources.base import Located
from mmcurate.sources.ingest import ingest, merge_ingests
from mmcurate.sources.reddit import (
    RedditOptions,
    RedditSource,
    answer_skip_reason,
    as_int,
    flag,
    image_refs,
    is_question,
    is_survey,
    post_skip_reason,
)
from tests.fixtures.builders import reddit as reddit_builder

OPTS = RedditOptions()
MMCURATE = Path(sys.executable).with_name("mmcurate")

EXPECTED_IDS = sorted(
    [
        "10a001/j3c001",
        "10a002/j3c002",
        "10a003/j3c003",
        "10a003/j3c004",
        "10a004/j3c005",
        "10a005/j3c006",
        "10a006/j3c007",
        "10a007/j3c008",
        "10a007/j3c009",
        "10a008/j3c010",
        "10a009/j3c011",
        "10a010/j3c012",
        "10a011/j3c013",
        "10a012/j3c014",
        "10a013/j3c015",
        "10a013/j3c016",
        "10a014/j3c017",
        "10a015/j3c018",
        "10a016/j3c019",
        "10a017/j3c020",
        "10e001/n1",
    ]
)
EXPECTED_QUARANTINE = [  # (locator, start of reason), in file order
    ("RS_2023-01.zst:28", "post 10c001: image file missing: missing01.jpg"),
    ("RS_2023-01.zst:29", "post 10c002: undecodable image"),
    ("RS_2023-01.zst:30", "post 10c003: image path '../secret.jpg' escapes the source root"),
    ("RS_2023-01.zst:31", "malformed JSON: Expecting value at column 89"),
    ("RS_2023-01.zst:32", "invalid UTF-8 at byte 37"),
    ("RC_2023-01.zst:31", "malformed JSON: Unterminated string"),
    ("RC_2023-02.zst", "truncated zstd stream after line 1"),
]
SKIPPED = {"no_image": 3, "not_question": 3, "survey": 2, "removed": 1, "no_qualifying_comment": 2}
COMMENTS_SKIPPED = {
    "deleted_body": 2,
    "deleted_author": 1,
    "excluded_author": 2,
    "too_short": 1,
    "few_sentences": 1,
    "not_top_level": 1,
}


def build_fixture(out: Path) -> Path:
    reddit_builder.build(out)
    return out


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fixture(tmp_path_factory.mktemp("reddit") / "reddit")


@pytest.fixture(scope="module")
def result(root: Path, tmp_path_factory: pytest.TempPathFactory):
    return ingest("reddit", root, tmp_path_factory.mktemp("out"))


def run_adapter(root: Path, store_dir: Path, **options) -> tuple[RedditSource, list[Sample], list[Rejected]]:
    adapter = RedditSource(root, ImageStore(store_dir), options=options)
    records = list(adapter.records())
    return (
        adapter,
        [r.sample for r in records if isinstance(r, Located)],
        [r for r in records if isinstance(r, Rejected)],
    )


# --- rules -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "title, expected",
    [
        ("What bird is this?", True),
        ("WHO built this bridge?", True),
        ("how's this tool used?", True),
        ("Whose coin is this?", True),
        ("What bird is this", False),  # no question mark
        ("Whatever happened to this camera?", False),  # not the whole word
        ("Is this a hawk?", False),
        ("My cat, why?", False),  # the question word must come first
    ],
)
def test_is_question(title: str, expected: bool) -> None:
    assert is_question(title, OPTS.question_words) is expected


@pytest.mark.parametrize(
    "title, expected",
    [
        ("What is your favorite lens?", True),
        ("Which one would you buy?", True),
        ("What\u2019s your go-to brew?", True),  # typographic apostrophe
        ("How many of you have ever seen this?", False),
        ("Why do YOU think the moon is grey?", True),
        ("Why is the moon grey?", False),
    ],
)
def test_is_survey(title: str, expected: bool) -> None:
    assert is_survey(title, OPTS.survey_phrases) is expected


@pytest.mark.parametrize(
    "phrase",
    [
        "do you",
        "what is your",
        "what's your",
        "what are your",
        "have you ever",
        "would you",
        "your favorite",
        "your favourite",
    ],
)
def test_every_survey_phrase_of_the_rule_is_a_default(phrase: str) -> None:
    assert is_survey(f"Why {phrase.upper()} like this one?", OPTS.survey_phrases)


def test_image_refs_single_url() -> None:
    (ref,) = image_refs({"url": "https://i.redd.it/abc.JPG"}, OPTS)
    assert (ref.name, ref.url) == ("abc.JPG", "https://i.redd.it/abc.JPG")
    assert image_refs({"url": "https://i.redd.it/abc.gif"}, OPTS) == []
    assert image_refs({"url": "https://imgur.com/abc.jpg"}, OPTS) == []
    assert image_refs({"url": "https://i.redd.it/a%2Fb.png?x=1&amp;y=2"}, OPTS)[0].name == "a/b.png"
    assert image_refs({"url": None, "is_self": True}, OPTS) == []


def test_image_refs_gallery_order_mime_and_animation() -> None:
    post = {
        "url": "https://www.reddit.com/gallery/x",
        "is_gallery": True,
        "gallery_data": {"items": [{"media_id": "b"}, {"media_id": "gif"}, {"media_id": "a"}, {"media_id": "c"}]},
        "media_metadata": {
            "a": {"e": "Image", "m": "image/png", "s": {"u": "https://preview.redd.it/a.png?s=1&amp;t=2"}},
            "b": {"e": "Image", "m": "image/jpg", "s": {"u": "u-b"}},
            "c": {"e": "Image", "m": "image/jpeg", "s": {"u": "u-c"}},
            "gif": {"e": "AnimatedImage", "m": "image/gif", "s": {"gif": "g"}},
        },
    }
    refs = image_refs(post, OPTS)
    assert [r.name for r in refs] == ["b.jpg", "a.png", "c.jpg"]
    assert refs[1].url == "https://preview.redd.it/a.png?s=1&t=2"
    assert image_refs({**post, "is_gallery": False}, OPTS) == []
    del post["gallery_data"]  # no order given: media_metadata order
    assert [r.name for r in image_refs(post, OPTS)] == ["a.png", "b.jpg", "c.jpg"]


def test_post_skip_reason_order() -> None:
    assert post_skip_reason({"removed_by_category": "moderator"}, "What is this?", OPTS) == "removed"
    assert post_skip_reason({"removed_by_category": "moderator"}, "Look at this", OPTS) == "not_question"
    assert post_skip_reason({}, "What are your thoughts on this?", OPTS) == "survey"
    assert post_skip_reason({"removed_by_category": ""}, "What is this?", OPTS) is None


LONG = (
    "The first sentence explains the object in plain words for everyone. " * 4
    + "It has enough words to pass the fifty word threshold easily without any trouble at all today."
)


@pytest.mark.parametrize(
    "changes, body, reason",
    [
        ({}, LONG, None),
        ({"parent_id": "t1_c0"}, LONG, "not_top_level"),
        ({}, "[deleted]", "deleted_body"),
        ({}, "[removed]", "deleted_body"),
        ({"author": "[deleted]"}, LONG, "deleted_author"),
        ({"author": "AUTOMODERATOR"}, LONG, "excluded_author"),
        ({}, "Short. Three. Sentences.", "too_short"),
        ({}, " ".join(["word"] * 60) + ". And two.", "few_sentences"),
    ],
)
def test_answer_skip_reason(changes: dict, body: str, reason: str | None) -> None:
    comment = {"link_id": "t3_p", "parent_id": "t3_p", "author": "someone", **changes}
    assert answer_skip_reason(comment, body, OPTS) == reason


def test_answer_word_boundary_is_strictly_more_than_fifty() -> None:
    comment = {"link_id": "t3_p", "parent_id": "t3_p", "author": "someone"}
    words = "One two three. Four five six. Seven eight nine."  # 9 words, 3 sentences
    assert answer_skip_reason(comment, words + " x" * 41, OPTS) == "too_short"  # 50 words
    assert answer_skip_reason(comment, words + " x" * 42, OPTS) is None  # 51 words


def test_as_int() -> None:
    assert as_int(1672531200) == as_int("1672531200") == as_int("1672531200.0") == as_int(1672531200.7) == 1672531200
    with pytest.raises(ValueError):
        as_int("yesterday")


# --- the fixture end to end --------------------------------------------------------------


def test_ingest_samples_exact(result) -> None:
    samples = pl.read_parquet(result.samples_path)
    assert sorted(samples["source_id"]) == EXPECTED_IDS
    assert result.samples == len(EXPECTED_IDS)
    assert set(samples["source"]) == {"reddit"}
    assert all(len(r) == 1 and len(r[0].split()) > 50 for r in samples["answers"])
    assert samples["gold_contexts"].list.len().sum() == samples["negative_contexts"].list.len().sum() == 0


def test_ingest_quarantine_exact(result) -> None:
    quarantine = pl.read_parquet(result.quarantine_path)
    rows = list(zip(quarantine["locator"], quarantine["reason"]))
    assert len(rows) == len(EXPECTED_QUARANTINE) == result.quarantined
    for (locator, reason), (want_locator, want_reason) in zip(rows, EXPECTED_QUARANTINE):
        assert locator == want_locator and reason.startswith(want_reason), (locator, reason)


def test_html_entities_string_time_and_missing_permalink(result) -> None:
    samples = pl.read_parquet(result.samples_path)
    row = samples.filter(pl.col("source_id") == "10a017/j3c020").row(0, named=True)
    assert row["question"] == "What's the difference between these two coins & how old are they?"
    assert row["answers"][0].startswith("The left coin is a bronze piece & the right")
    assert "> 2,000 years" in row["answers"][0]
    meta = json.loads(row["meta"])
    assert meta["created_utc"] == 1672531200 + 95000
    assert meta["preview_url"] == "https://preview.redd.it/10a017img.jpeg?auto=webp&s=9f"
    assert meta["image_urls"] == ["https://i.redd.it/10a017img.jpeg"]
    assert meta["over_18"] is True and "permalink" not in meta
    assert (meta["post_id"], meta["comment_id"], meta["subreddit"]) == ("10a017", "j3c020", "AncientCoins")


def test_meta_and_images_of_plain_sample(root: Path, result) -> None:
    samples = pl.read_parquet(result.samples_path)
    row = samples.filter(pl.col("source_id") == "10a003/j3c004").row(0, named=True)
    assert row["question"] == "What breed is this orange tabby cat?"
    meta = json.loads(row["meta"])
    assert meta == {
        "subreddit": "cats",
        "post_id": "10a003",
        "comment_id": "j3c004",
        "created_utc": 1672531200 + 4 * 3600,
        "post_score": 120,
        "comment_score": 17,
        "num_comments": 4,
        "over_18": False,
        "month": "2023-01",
        "image_urls": ["https://i.redd.it/10a003img.jpg"],
        "permalink": "/r/pics/comments/10a003/_/j3c004/",
        "post_permalink": "/r/cats/comments/10a003/",
    }
    assert row["images"] == [sha256_file(root / "images" / "10a003img.jpg")]
    assert ImageStore(result.images_dir).read(row["images"][0]) == (root / "images" / "10a003img.jpg").read_bytes()


def test_gallery_images_in_gallery_order(root: Path, result) -> None:
    samples = pl.read_parquet(result.samples_path)
    row = samples.filter(pl.col("source_id") == "10a016/j3c019").row(0, named=True)
    assert row["images"] == [
        sha256_file(root / "images" / "gal1brick.jpg"),
        sha256_file(root / "images" / "gal2gravel.png"),
    ]
    store = ImageStore(result.images_dir)
    assert [store.path(s).suffix for s in row["images"]] == [".jpg", ".png"]
    assert json.loads(row["meta"])["image_urls"][1] == "https://preview.redd.it/gal2gravel.png?width=160&s=b2"


def test_funnel_counts_and_prefilter_equivalence(root: Path, tmp_path: Path) -> None:
    fast, fast_samples, fast_rejected = run_adapter(root, tmp_path / "a")
    slow, slow_samples, slow_rejected = run_adapter(root, tmp_path / "b", prefilter=False)
    assert fast.skipped == slow.skipped == Counter(SKIPPED)
    assert fast.comments_skipped == slow.comments_skipped == Counter(COMMENTS_SKIPPED)
    assert [s.to_row() for s in fast_samples] == [s.to_row() for s in slow_samples]
    assert fast_rejected == slow_rejected
    assert sorted(s.source_id for s in fast_samples) == EXPECTED_IDS


def test_prefilter_off_quarantines_broken_lines_of_any_post(tmp_path: Path) -> None:
    root = tmp_path / "r"
    (root / "images").mkdir(parents=True)
    comp = zstandard.ZstdCompressor()
    (root / "RS_2023-03.zst").write_bytes(comp.compress(b'{"id":"x","title":"text post"\n'))
    (root / "RC_2023-03.zst").write_bytes(comp.compress(b'{"id":"c","link_id":"t3_other",\n'))
    _, _, strict = run_adapter(root, tmp_path / "s", prefilter=False)
    assert [r.locator for r in strict] == ["RS_2023-03.zst:1", "RC_2023-03.zst:1"]
    fast, _, lenient = run_adapter(root, tmp_path / "f")
    assert lenient == [] and fast.skipped["no_image"] == 1


def test_oversized_line_option(root: Path, tmp_path: Path) -> None:
    _, samples, rejected = run_adapter(root, tmp_path / "s", max_line_bytes=800)
    reasons = [r.reason for r in rejected if r.reason.startswith("line longer than 800 bytes")]
    assert reasons and not any(s.source_id == "10a016/j3c019" for s in samples)  # the gallery line is long


def test_month_without_partner_and_unusable_roots(root: Path, tmp_path: Path) -> None:
    partial = tmp_path / "partial"
    shutil.copytree(root, partial)
    (partial / "RC_2023-02.zst").unlink()
    (partial / "RS_2023-01.zst").rename(partial / "RS_2023-01.zst.part")  # not a dump name
    _, samples, rejected = run_adapter(partial, tmp_path / "s")
    assert samples == []
    assert [(r.locator, r.reason) for r in rejected] == [
        ("RC_2023-01.zst", "no RS_2023-01.zst beside it: month cannot be joined"),
        ("RS_2023-02.zst", "no RC_2023-02.zst beside it: month cannot be joined"),
    ]
    empty = tmp_path / "empty"
    (empty / "images").mkdir(parents=True)
    with pytest.raises(SourceError, match="no RS_YYYY-MM.zst/RC_YYYY-MM.zst or <subreddit>_submissions.zst"):
        RedditSource(empty, ImageStore(tmp_path / "s"))
    with pytest.raises(SourceError, match="image folder .* is not a readable directory"):
        RedditSource(root, ImageStore(tmp_path / "s"), images=tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="reddit option colour"):
        RedditSource(root, ImageStore(tmp_path / "s"), options={"colour": "red"})
    with pytest.raises(SourceError, match="reddit: at most 6 image hosts"):
        RedditSource(root, ImageStore(tmp_path / "s"), options={"image_hosts": [f"i{n}.example" for n in range(7)]})


def test_images_option_points_elsewhere(root: Path, tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere"
    shutil.copytree(root / "images", moved)
    bare = tmp_path / "bare"
    bare.mkdir()
    for dump in root.glob("*.zst"):
        shutil.copy(dump, bare / dump.name)
    adapter = RedditSource(bare, ImageStore(tmp_path / "s"), images=moved)
    assert sorted(r.sample.source_id for r in adapter.records() if isinstance(r, Located)) == EXPECTED_IDS


def test_parquet_round_trip_through_datasets_and_polars(result, tmp_path: Path) -> None:
    from datasets import load_dataset

    ds = load_dataset("parquet", data_files=str(result.samples_path), split="train", cache_dir=str(tmp_path))
    frame = pl.read_parquet(result.samples_path)
    assert ds.num_rows == frame.height == len(EXPECTED_IDS)
    assert ds.column_names == frame.columns
    assert sorted(ds["source_id"]) == EXPECTED_IDS
    by_id = {row["source_id"]: row for row in ds}
    polars_row = frame.filter(pl.col("source_id") == "10a016/j3c019").row(0, named=True)
    assert by_id["10a016/j3c019"]["images"] == polars_row["images"]
    assert json.loads(by_id["10a016/j3c019"]["meta"]) == json.loads(polars_row["meta"])


def test_cli_ingest(root: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    done = subprocess.run(
        [str(MMCURATE), "ingest", "reddit", str(root), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert f"reddit: {len(EXPECTED_IDS)} samples" in done.stdout
    assert f"{len(EXPECTED_QUARANTINE)} quarantined" in done.stdout
    assert pl.read_parquet(tmp_path / "o" / "quarantine.parquet").height == len(EXPECTED_QUARANTINE)

    missing = subprocess.run(
        [str(MMCURATE), "ingest", "reddit", str(tmp_path / "nope"), "--out", str(tmp_path / "p")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert missing.returncode == 2
    assert missing.stderr.strip().count("\n") == 0
    assert (
        missing.stderr.startswith("mmcurate: error: reddit: source root")
        and "not a readable directory" in missing.stderr
    )


@pytest.mark.parametrize(
    "value, expected",
    [
        (True, True),
        (False, False),
        (None, False),
        ("true", True),
        ("True", True),
        ("false", False),
        ("null", False),
        ("None", False),
        ("", False),
        ("0", False),
        (0, False),
        (1, True),
        ("moderator", True),
        ("deleted", True),
    ],
)
def test_flags_written_as_text_read_like_json(value, expected: bool) -> None:
    assert flag(value) is expected


def test_text_null_is_not_removed() -> None:
    assert post_skip_reason({"removed_by_category": "null"}, "What is this?", OPTS) is None
    assert post_skip_reason({"removed_by_category": "moderator"}, "What is this?", OPTS) == "removed"
    gallery = {"is_gallery": "true", "media_metadata": {"a": {"e": "Image", "m": "image/png", "s": {"u": "u"}}}}
    assert [r.name for r in image_refs(gallery, OPTS)] == ["a.png"]
    assert image_refs({**gallery, "is_gallery": "false"}, OPTS) == []


def _dump(path: Path, records: list[dict]) -> None:
    path.write_bytes(zstandard.ZstdCompressor().compress(b"".join(json.dumps(r).encode() + b"\n" for r in records)))


def test_per_subreddit_dumps_with_flags_as_text(root: Path, tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(root / "images", raw / "images")
    posts = [
        {
            "id": "p1",
            "title": "What breed is this orange tabby cat?",
            "url": "https://i.redd.it/10a003img.jpg",
            "created_utc": "1388534400",
            "over_18": "false",
            "removed_by_category": "null",
            "subreddit": "cats",
        },
        {
            "id": "p2",
            "title": "Why is this cat so fluffy?",
            "url": "https://i.redd.it/10a003img.jpg",
            "created_utc": 1388534500,
            "over_18": "true",
            "removed_by_category": "moderator",
        },
    ]
    comments = [
        {"id": f"c{p}", "link_id": f"t3_{p}", "parent_id": f"t3_{p}", "author": "someone", "body": LONG}
        for p in ("p1", "p2")
    ]
    _dump(raw / "cats_submissions.zst", posts)
    _dump(raw / "cats_comments.zst", comments)
    _dump(raw / "dogs_submissions.zst", posts)
    adapter, samples, rejected = run_adapter(raw, tmp_path / "s")
    assert [p.key for p in adapter.pairs] == ["r/cats", "r/dogs"]
    assert [s.source_id for s in samples] == ["p1/cp1"]
    assert samples[0].meta["over_18"] is False and samples[0].meta["month"] == "2014-01"
    assert adapter.skipped["removed"] == 1
    assert [(r.locator, r.reason) for r in rejected] == [
        ("dogs_submissions.zst", "no dogs_comments.zst beside it: subreddit cannot be joined")
    ]


def ingest_pair(root: Path, key: str, out: Path):
    return ingest("reddit", root, out, options={"pairs": [key]})


def test_months_ingested_apart_and_merged_equal_one_ingest(root: Path, result, tmp_path: Path) -> None:
    assert [(key, options) for key, options in RedditSource.parts(root, {})] == [
        ("2023-01", {"pairs": ["2023-01"]}),
        ("2023-02", {"pairs": ["2023-02"]}),
    ]
    assert RedditSource.parts(root, {"pairs": ["2023-01"]}) == []  # already one part
    parts = [ingest_pair(root, key, tmp_path / key) for key in ("2023-01", "2023-02")]
    assert [p.source_files for p in parts] == [
        [str(root / "RS_2023-01.zst"), str(root / "RC_2023-01.zst")],
        [str(root / "RS_2023-02.zst"), str(root / "RC_2023-02.zst")],
    ]
    merged = merge_ingests(parts, tmp_path / "merged")
    again = merge_ingests(parts, tmp_path / "again")
    for name in ("samples.parquet", "quarantine.parquet", "locators.parquet"):
        assert (merged.out / name).read_bytes() == (result.out / name).read_bytes() == (again.out / name).read_bytes()
    assert (merged.samples, merged.quarantined, merged.skipped) == (result.samples, result.quarantined, result.skipped)
    assert sorted(p.name for p in merged.images_dir.rglob("*.*")) == sorted(
        p.name for p in result.images_dir.rglob("*.*")
    )
    assert json.loads((merged.out / "ingest.json").read_text())["samples"] == len(EXPECTED_IDS)


def test_merge_quarantines_a_sample_repeated_across_parts(root: Path, tmp_path: Path) -> None:
    first, second = (ingest_pair(root, "2023-02", tmp_path / name) for name in ("a", "b"))
    merged = merge_ingests([first, second], tmp_path / "merged")
    rows = pl.read_parquet(merged.quarantine_path).select("locator", "reason", "raw").rows()
    assert rows == [("RC_2023-02.zst", "truncated zstd stream after line 1", None)] * 2 + [
        ("RC_2023-02.zst:1", "duplicate source_id", "10e001/n1")
    ]
    assert (merged.samples, merged.quarantined, merged.skipped) == (1, 3, {"no_qualifying_comment": 2})
    with pytest.raises(SourceError, match="no dump pair 2023-03"):
        ingest_pair(root, "2023-03", tmp_path / "c")


def test_the_flows_import_no_reddit_code_until_reddit_is_read() -> None:
    """Reddit's reader and its line picker load only when a Reddit dump is ingested."""
    code = (
        "import json, sys, mmcurate.cli.app, mmcurate.flows.deflectionbench.curate, mmcurate.flows.reflvqa.curate\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('mmcurate.sources.'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(done.stdout)
    assert loaded and not [m for m in loaded if "reddit" in m or "linescan" in m or m.endswith(".zst")], loaded
