"""Property tests: the judge parser, the pre-judge and every adapter survive arbitrary input.

Adapters are fed hypothesis-generated raw records in their real on-disk layout (valid-ish
records with missing, wrong-typed and odd fields: unicode, HTML entities, lone surrogates
as JSON escapes, ``inf``/``1e999``, NUL bytes, over-long file names, path escapes, junk
lines) and run through ``ingest``. Each property: no exception escapes, and every input
record is accounted for exactly once as a sample, a quarantine row or a counted skip.
Images are tiny Pillow-made files (good, truncated, garbage) so each example stays fast.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import tempfile
from pathlib import Path
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from PIL import Image

import mmcurate.sources.ingest as ingest_module
from mmcurate.judging.grades import JudgeItem
from mmcurate.judging.prejudge import lexical_grade, prejudge
from mmcurate.judging.simpleqa import Grade, parse_grade
from mmcurate.sources.ingest import ingest

FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------- judge

SPELLINGS = {
    "a": Grade.CORRECT,
    "b": Grade.INCORRECT,
    "c": Grade.NOT_ATTEMPTED,
    "correct": Grade.CORRECT,
    "incorrect": Grade.INCORRECT,
    "not_attempted": Grade.NOT_ATTEMPTED,
    "notattempted": Grade.NOT_ATTEMPTED,
}
REPLY_PIECES = st.sampled_from(
    [
        "A",
        "b",
        "C",
        "CORRECT",
        "incorrect",
        "NOT_ATTEMPTED",
        "not  attempted",
        ".",
        "*",
        '"',
        "'",
        "`",
        " ",
        "\n",
        ")",
        "The answer is ",
        "A or B",
        "**",
        "B)",
        "c.",
        "é",
    ]
)


def _core(reply: str) -> str:
    """The reply without whitespace, quotes, backticks, asterisks and periods, lowercased."""
    return re.sub(r"[\s\"'`*.]", "", reply).lower()


@settings(max_examples=300, deadline=None)
@given(reply=st.one_of(st.text(max_size=40), st.lists(REPLY_PIECES, max_size=6).map("".join)))
def test_parse_grade_returns_a_grade_only_for_an_accepted_spelling(reply: str) -> None:
    grade = parse_grade(reply)
    if grade is not None:
        assert isinstance(grade, Grade) and grade is not Grade.JUDGE_ERROR
        assert SPELLINGS.get(_core(reply)) is grade, reply
        assert reply.count(".") <= 1


@settings(max_examples=100, deadline=None)
@given(
    spelling=st.sampled_from(["A", "B", "C", "CORRECT", "INCORRECT", "NOT_ATTEMPTED", "NOT ATTEMPTED"]),
    lower=st.booleans(),
    wrap=st.sampled_from(["", '"', "'", "`", "**"]),
    period=st.sampled_from(["", "."]),
    outside=st.booleans(),
    pad=st.sampled_from(["", " ", "\n", " \n "]),
)
def test_parse_grade_accepts_every_decorated_spelling(spelling, lower, wrap, period, outside, pad) -> None:
    core = spelling.lower() if lower else spelling
    reply = pad + (f"{wrap}{core}{wrap}{period}" if outside else f"{wrap}{core}{period}{wrap}") + pad
    assert parse_grade(reply) is SPELLINGS[_core(spelling)]


@settings(max_examples=200, deadline=None)
@given(
    answer=st.text(max_size=40),
    gold=st.lists(st.text(max_size=20), max_size=3),
    ranges=st.lists(st.tuples(st.floats(allow_nan=True), st.floats(allow_nan=True)), max_size=2),
)
def test_prejudge_and_lexical_grade_never_raise(answer, gold, ranges) -> None:
    item = JudgeItem("k", "q?", gold, answer, ranges)
    result = prejudge(item)
    assert result is None or (result[0] in Grade and result[1].startswith("prejudge."))
    assert lexical_grade(item) in (Grade.CORRECT, Grade.INCORRECT)


# ---------------------------------------------------------------------------- raw values

ODD = [
    "",
    " ",
    "&amp; &lt;b&gt; &#39;",
    "What is this?",
    "inf",
    "nan",
    "-1",
    "1e999",
    "3.0",
    "é☃ 😀",
    "\ud83d",
    "[deleted]",
    "../x.jpg",
    "a\x00b",
    "x" * 300,
    '"quoted"',
    "t3_p1",
    "null",
]
TEXT = st.one_of(st.text(max_size=12), st.sampled_from(ODD))
SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True), TEXT
)
JUNK = st.one_of(SCALAR, st.lists(SCALAR, max_size=3), st.dictionaries(st.text(max_size=4), SCALAR, max_size=2))
JUNK_LINE = st.one_of(st.binary(max_size=20), st.sampled_from([b"{", b"[1, 2]", b'"s"', b"\xff\xfe{}", b"{}"])).map(
    lambda b: b.replace(b"\n", b" ").replace(b"\r", b" ") or b"#"
)


def mostly(good: st.SearchStrategy, other: st.SearchStrategy = TEXT, odds: int = 6) -> st.SearchStrategy:
    """``good`` ``odds`` times out of ``odds + 1``, else ``other`` (one_of would pick evenly)."""
    return st.sampled_from([True] * odds + [False]).flatmap(lambda pick: good if pick else other)


def field(good: st.SearchStrategy) -> st.SearchStrategy:
    """Mostly a well-formed value, sometimes junk, sometimes absent (``MISSING``)."""
    return mostly(good, st.one_of(JUNK, st.just(MISSING)), odds=12)


MISSING = object()


def record(**fields: st.SearchStrategy) -> st.SearchStrategy:
    return st.fixed_dictionaries({k: field(v) for k, v in fields.items()}).map(
        lambda d: {k: v for k, v in d.items() if v is not MISSING}
    )


def dumps(value) -> bytes:
    return json.dumps(value).encode("ascii")  # lone surrogates become "\ud83d" escapes, as in real dumps


def _image(fmt: str, color: tuple[int, int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 6), color).save(buf, format=fmt)
    return buf.getvalue()


GOOD_JPEG, GOOD_PNG = _image("JPEG", (200, 30, 30)), _image("PNG", (30, 200, 30))
IMAGES = {
    "good.jpg": GOOD_JPEG,
    "good.png": GOOD_PNG,
    "trunc.jpg": GOOD_JPEG[: len(GOOD_JPEG) // 2],
    "junk.jpg": b"not an image at all",
}
IMAGE_NAME = st.sampled_from([*IMAGES, "absent.jpg", "../good.jpg", "/etc/passwd", "a\x00b.jpg", "x" * 300 + ".jpg"])


def write_images(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in IMAGES.items():
        (folder / name).write_bytes(data)


def run(name: str, build, **kwargs):
    """Build a root with ``build(root)``, ingest it, return (result, samples, quarantine, adapter)."""
    captured = []
    real = ingest_module.adapter_class

    def capture(source):
        cls = real(source)

        def make(*args, **kw):
            captured.append(cls(*args, **kw))
            return captured[-1]

        return make

    with tempfile.TemporaryDirectory() as tmp:
        root, out = Path(tmp) / "root", Path(tmp) / "out"
        root.mkdir()
        build(root)
        with mock.patch.object(ingest_module, "adapter_class", capture):
            result = ingest(name, root, out, **kwargs)
        samples = pq.read_table(result.samples_path).to_pylist()
        quarantine = pq.read_table(result.quarantine_path).to_pylist()
        assert json.loads((out / "ingest.json").read_text())["skipped"] == result.skipped
        shutil.rmtree(out)
    assert result.samples == len(samples) and result.quarantined == len(quarantine)
    event(f"{name}: samples {'yes' if samples else 'no'}, quarantine {'yes' if quarantine else 'no'}")
    return result, samples, quarantine, captured[0]


def per_record(quarantine: list[dict], prefix: str) -> int:
    """Quarantine rows that stand for one input record: located at a line/key of the
    record file (``prefix``), including samples the ingest could not store (duplicates,
    text that is not valid Unicode), which are located where they were read."""
    return sum(q["locator"].startswith(prefix) for q in quarantine)


STORE_PROBLEMS = ("duplicate source_id", "text is not valid Unicode", "sample cannot be stored")


# ---------------------------------------------------------------------------- reddit

POST_IDS = mostly(
    st.sampled_from(["p1", "p2"]), st.sampled_from(["p3", "é9", "p\ud83d"]), odds=3
)  # a small pool: repeated posts happen
ANSWER = (
    "The carving shows a heron standing in reeds. It was made in the late period. Similar pieces are kept in "
    "several museums today, and they were often given as gifts. The style matches the workshops of the river "
    "towns, which used soft stone. Experts date it by the tool marks and the pigment traces left on it."
)
REDDIT_URL = st.one_of(
    st.sampled_from(
        [
            "https://i.redd.it/good.jpg",
            "https://i.redd.it/trunc.jpg",
            "https://i.redd.it/junk.jpg",
            "https://i.redd.it/absent.png",
            "https://i.redd.it/..%2Fgood.jpg",
            "https://i.redd.it/a%00b.jpg",
            "https://[i.redd.it/good.jpg",
            "https://i.redd.it/" + "x" * 300 + ".jpg",
            "https://example.com/x.jpg",
        ]
    ),
    TEXT,
)
POST = record(
    id=POST_IDS,
    title=mostly(
        st.sampled_from(
            ["What is this carving?", "How old is this?", "What is your favorite?", "Look at this", "What &amp; why?"]
        )
    ),
    url=mostly(st.just("https://i.redd.it/good.jpg"), REDDIT_URL),
    created_utc=mostly(st.sampled_from([1672531200, "1672531200", 1.6e9]), JUNK),
    subreddit=TEXT,
    is_gallery=st.booleans(),
    media_metadata=st.dictionaries(
        st.sampled_from(["good", "m2", "../x"]),
        st.fixed_dictionaries(
            {
                "e": st.sampled_from(["Image", "AnimatedImage"]),
                "m": st.sampled_from(["image/jpg", "image/png", "x"]),
                "s": st.just({"u": "https://preview.redd.it/a.jpg?a=1&amp;b=2"}),
            }
        ),
        max_size=2,
    ),
    removed_by_category=mostly(st.none(), st.just("moderator")),
)
COMMENT = st.tuples(
    POST_IDS,
    record(
        id=mostly(st.sampled_from(["c1", "c2", "c3"])),
        body=mostly(st.just(ANSWER)),
        author=mostly(st.just("someone"), st.sampled_from(["[deleted]", "AutoModerator"])),
    ),
)


def _comment(link: str, fields: dict) -> dict:
    return {"link_id": f"t3_{link}", "parent_id": f"t3_{link}", **fields}


@FUZZ
@given(
    posts=st.lists(mostly(POST, JUNK_LINE), min_size=1, max_size=6),
    comments=st.lists(mostly(COMMENT, JUNK_LINE), max_size=6),
    prefilter=st.booleans(),
)
def test_reddit_every_post_is_a_sample_a_quarantine_row_or_a_counted_skip(posts, comments, prefilter) -> None:
    def build(root: Path) -> None:
        write_images(root / "images")
        (root / "images" / "good.png").write_bytes(GOOD_PNG)
        rs = [p if isinstance(p, bytes) else dumps(p) for p in posts]
        rc = [c if isinstance(c, bytes) else dumps(_comment(*c)) for c in comments]
        for name, lines in (("RS_2023-01.zst", rs), ("RC_2023-01.zst", rc)):
            (root / name).write_bytes(zstandard.ZstdCompressor().compress(b"\n".join(lines) + b"\n"))

    result, samples, quarantine, adapter = run("reddit", build, options={"prefilter": prefilter})
    stored_rows = [q for q in quarantine if q["reason"].startswith(STORE_PROBLEMS)]
    assert all(q["locator"].startswith("RC_2023-01.zst:") for q in stored_rows)  # where the answer was read
    rs_rows = [q for q in quarantine if q["locator"].startswith("RS_2023-01.zst:")]
    rc_rows = [q for q in quarantine if q["locator"].startswith("RC_2023-01.zst:") and q not in stored_rows]
    assert len(rs_rows) + len(rc_rows) + len(stored_rows) == len(quarantine)
    # a post is answered when some comment became a sample (stored or quarantined at ingest)
    answered = {s["source_id"].split("/", 1)[0] for s in samples} | {q["raw"].split("/", 1)[0] for q in stored_rows}
    assert len(posts) == len(rs_rows) + sum(result.skipped.values()) + len(answered)
    assert len(samples) + len(stored_rows) + len(rc_rows) + sum(adapter.comments_skipped.values()) <= len(comments)


# ---------------------------------------------------------------------------- infoseek

INFOSEEK = record(
    data_id=mostly(
        st.sampled_from(["infoseek_val_1", "infoseek_val_2", "infoseek_val_3", "é"]), st.just("d\ud83d") | TEXT
    ),
    image_id=mostly(
        st.sampled_from(["oven_01000001", "oven_02000002"]),
        st.sampled_from(["oven_03000003", "oven_04000004", "oven_05000005", "../x", "oven_\x00"]) | TEXT,
    ),
    question=mostly(st.sampled_from(["What is this?", "How tall?"])),
    answer=mostly(st.just(["Paris"]), st.lists(TEXT, max_size=2)),
    answer_eval=st.lists(
        st.one_of(
            TEXT,
            st.just({"wikidata": 1.0, "range": [0.9, 1.1]}),
            st.just({"wikidata": float("inf"), "range": [1, "x"]}),
        ),
        max_size=2,
    ),
    data_split=TEXT,
)
OVEN = {
    "oven_01000001": "good.jpg",
    "oven_02000002": "good.png",
    "oven_03000003": "trunc.jpg",
    "oven_04000004": "junk.jpg",
}


@FUZZ
@given(
    rows=st.lists(mostly(INFOSEEK, JUNK_LINE), min_size=1, max_size=6),
    links=st.lists(
        record(
            data_id=st.sampled_from(["infoseek_val_1", "infoseek_val_2"]),
            entity_id=st.sampled_from(["Q1", "Q2"]),
            entity_text=TEXT,
        ),
        max_size=3,
    ),
    kb=st.lists(
        record(
            wikidata_id=st.sampled_from(["Q1", "Q2"]),
            wikipedia_title=TEXT,
            wikipedia_content=st.just("It is in Paris, a city.") | TEXT,
            wikipedia_summary=TEXT,
        ),
        max_size=3,
    ),
)
def test_infoseek_every_question_line_is_a_sample_or_a_quarantine_row(rows, links, kb) -> None:
    def build(root: Path) -> None:
        for image_id, name in OVEN.items():
            target = root / "oven_images" / image_id.removeprefix("oven_")[:2] / f"{image_id}.jpg"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(IMAGES[name])
        (root / "infoseek_val.jsonl").write_bytes(b"\n".join(r if isinstance(r, bytes) else dumps(r) for r in rows))
        (root / "infoseek_val_withkb.jsonl").write_bytes(b"\n".join(dumps(r) for r in links))
        (root / "Wiki6M_ver_1_0.jsonl").write_bytes(b"\n".join(dumps(r) for r in kb))

    _, samples, quarantine, _ = run("infoseek", build)
    lines = sum(bool((r if isinstance(r, bytes) else dumps(r)).decode("utf-8", "replace").strip()) for r in rows)
    assert len(samples) + per_record(quarantine, "infoseek_val.jsonl:") == lines


# ---------------------------------------------------------------------------- viquae

VIQUAE = record(
    id=mostly(st.sampled_from(["v1", "v2", "v3", 3]), st.just("v\ud83d") | JUNK),
    image=mostly(st.sampled_from(["good.jpg", "good.png"]), IMAGE_NAME | TEXT),
    input=mostly(st.just("Who is this?")),
    output=record(
        answer=mostly(st.just(["Paris"]), st.lists(TEXT, max_size=2)),
        original_answer=TEXT,
        provenance=st.lists(record(title=TEXT, wikipedia_id=st.sampled_from(["5", "6"]) | JUNK), max_size=2),
    ),
    meta=JUNK,
)


@FUZZ
@given(
    rows=st.lists(mostly(VIQUAE, JUNK_LINE), min_size=1, max_size=6),
    kb=st.lists(
        record(
            wikipedia_id=st.sampled_from(["5", "6"]),
            wikipedia_title=TEXT,
            text=st.lists(st.just("Paris is here.") | TEXT, max_size=3) | JUNK,
        ),
        max_size=3,
    ),
)
def test_viquae_every_question_line_is_a_sample_or_a_quarantine_row(rows, kb) -> None:
    def build(root: Path) -> None:
        write_images(root / "images")
        (root / "validation.jsonl").write_bytes(b"\n".join(r if isinstance(r, bytes) else dumps(r) for r in rows))
        (root / "kb.jsonl").write_bytes(b"\n".join(dumps(r) for r in kb))

    _, samples, quarantine, _ = run("viquae", build)
    lines = sum(bool((r if isinstance(r, bytes) else dumps(r)).decode("utf-8", "replace").strip()) for r in rows)
    assert len(samples) + per_record(quarantine, "validation.jsonl:") == lines


# ---------------------------------------------------------------------------- evqa

EVQA_COLUMNS = [
    "question",
    "answer",
    "dataset_image_ids",
    "dataset_name",
    "question_type",
    "wikipedia_url",
    "wikipedia_title",
    "evidence",
    "evidence_section_id",
    "encyclopedic_vqa_split",
]
EVQA_ROW = st.fixed_dictionaries(
    {
        "question": mostly(st.just("Where is this?")),
        "answer": mostly(st.sampled_from(["Paris", "Paris|Rome", "a&&b"])),
        "dataset_image_ids": mostly(st.sampled_from(["abc", "abc|abd", "abd"])),
        "dataset_name": mostly(st.just("landmarks"), st.just("inaturalist") | TEXT),
        "question_type": st.sampled_from(["templated", "automatic", "2_hop"]),
        "wikipedia_url": mostly(st.sampled_from(["u1", "u1|u2"])),
        "wikipedia_title": TEXT,
        "evidence": TEXT,
        "evidence_section_id": mostly(
            st.sampled_from(["0", "1|0", "3.0", ""]), st.sampled_from(["inf", "1e999", "-1"])
        ),
        "encyclopedic_vqa_split": TEXT,
    }
).map(lambda d: [d[c] for c in EVQA_COLUMNS])
CELLS = st.lists(TEXT, min_size=len(EVQA_COLUMNS) - 2, max_size=len(EVQA_COLUMNS) + 1)  # ragged rows


@FUZZ
@given(rows=st.lists(mostly(EVQA_ROW, CELLS), min_size=1, max_size=6), bad_bytes=st.booleans())
def test_evqa_every_csv_row_is_a_sample_or_a_quarantine_row(rows, bad_bytes) -> None:
    def build(root: Path) -> None:
        for image_id, name in (("abc", "good.jpg"), ("abd", "trunc.jpg")):
            target = root / "GLD" / image_id[0] / image_id[1] / image_id[2] / f"{image_id}.jpg"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(IMAGES[name])
        text = io.StringIO()
        writer = csv.writer(text)
        writer.writerow(EVQA_COLUMNS)
        for row in rows:
            writer.writerow([c.replace("\x00", "") for c in row])  # csv.writer cannot write NUL
        data = text.getvalue().encode("utf-8", "surrogatepass")
        (root / "val.csv").write_bytes(data.replace(b"abc", b"ab\xffc", 1) if bad_bytes else data)
        (root / "encyclopedic_kb_wiki.json").write_text(
            json.dumps({"u1": {"title": "One", "section_titles": ["One"], "section_texts": ["Paris is here."]}})
        )

    _, samples, quarantine, _ = run("evqa", build)
    with tempfile.TemporaryDirectory() as tmp:  # count the data rows as csv.DictReader sees them
        build(Path(tmp))
        with open(Path(tmp) / "val.csv", encoding="utf-8-sig", errors="surrogateescape", newline="") as handle:
            reader, expected = csv.reader(handle), -1  # the header is not a record
            while True:
                try:
                    expected += bool(next(reader))  # DictReader skips blank rows
                except StopIteration:
                    break
                except csv.Error:
                    expected += 1
    assert len(samples) + per_record(quarantine, "val.csv:") == expected


# ---------------------------------------------------------------------------- webqa


def _img_fact(line: int) -> dict:
    return {"image_id": 30_000_000 + line, "title": "t", "caption": "c"}


TXT_FACT = record(
    fact=mostly(st.just("Paris is the capital.")), title=TEXT, snippet_id=mostly(st.sampled_from(["s1", "s2"]), JUNK)
)
IMG_FACT = st.one_of(
    st.sampled_from([0, 1, 0, 1, 2, 3, 5]).map(_img_fact),
    record(image_id=st.sampled_from([30_000_000, float("inf"), "x", -1, 10**30]) | JUNK, caption=TEXT),
)
WEBQA = record(
    Q=mostly(st.just('"What is the capital?"')),
    A=mostly(st.just(['"Paris"']), st.lists(TEXT, max_size=2)),
    Qcate=st.sampled_from(["text", "YesNo", "choose"]),
    split=mostly(st.sampled_from(["train", "val"]), st.sampled_from(["test", "dev"])),
    txt_posFacts=st.lists(TXT_FACT, max_size=2),
    img_posFacts=st.lists(IMG_FACT, max_size=2),
    txt_negFacts=st.lists(TXT_FACT, max_size=2),
    img_negFacts=st.lists(IMG_FACT, max_size=2),
)


@FUZZ
@given(
    records=st.dictionaries(
        st.sampled_from(["g1", "g2", "g3", "g\ud83d", "é"]) | st.text(max_size=6),
        mostly(WEBQA, JUNK),
        min_size=1,
        max_size=5,
    )
)
def test_webqa_every_record_is_a_sample_a_quarantine_row_or_out_of_scope(records) -> None:
    def build(root: Path) -> None:
        import base64

        images = [GOOD_JPEG, GOOD_PNG, IMAGES["trunc.jpg"]]
        rows, offsets, at = [], [], 0
        for line, data in enumerate(images):
            row = f"{30_000_000 + line}\t{base64.b64encode(data).decode()}\n".encode()
            rows.append(row)
            offsets.append(at)
            at += len(row)
        offsets += [at + 4096]  # line 3 points past the file; lines 4+ are absent
        (root / "imgs.tsv").write_bytes(b"".join(rows))
        (root / "imgs.lineidx").write_text("".join(f"{o}\n" for o in offsets))
        (root / "WebQA_train_val.json").write_bytes(dumps(records))

    result, samples, quarantine, _ = run("webqa", build)
    out_of_scope = sum(
        isinstance(r, dict) and isinstance(r.get("split"), str) and r["split"] not in ("train", "val")
        for r in records.values()
    )
    whole = [q for q in quarantine if not q["reason"].startswith("dropped ")]  # fact drops are per fact
    assert result.skipped == ({"out_of_scope": out_of_scope} if out_of_scope else {})
    assert len(samples) + len(whole) + sum(result.skipped.values()) == len(records)


# ---------------------------------------------------------------------------- mmdocrag

QUOTE_IDS = st.sampled_from(["text1", "text2", "image1", "image2"])
MMDOC = record(
    q_id=mostly(st.integers(0, 5), JUNK),
    doc_name=mostly(st.just("doc")),
    question=mostly(st.just("What?")),
    answer_short=mostly(st.just("Paris")),
    text_quotes=st.lists(
        record(
            quote_id=st.sampled_from(["text1", "text2"]),
            text=mostly(st.just("Paris.")),
            page_id=mostly(st.integers(0, 2), JUNK),
            layout_id=st.integers(0, 2),
        ),
        min_size=1,
        max_size=2,
    ),
    img_quotes=st.lists(
        record(
            quote_id=st.sampled_from(["image1", "image2"]),
            img_path=mostly(st.sampled_from(["good.jpg", "images/good.png"]), IMAGE_NAME | TEXT),
            img_description=TEXT,
            page_id=st.integers(0, 2),
            layout_id=st.integers(3, 4),
        ),
        max_size=2,
    ),
    gold_quotes=mostly(st.just(["text1"]), st.lists(QUOTE_IDS, max_size=2)),
)


@FUZZ
@given(rows=st.lists(mostly(MMDOC, JUNK_LINE), min_size=1, max_size=6))
def test_mmdocrag_every_question_line_is_a_sample_or_a_quarantine_row(rows) -> None:
    def build(root: Path) -> None:
        write_images(root / "images")
        (root / "dataset").mkdir()
        for name in ("dev_20.jsonl", "evaluation_20.jsonl"):
            (root / "dataset" / name).write_bytes(b"")
        (root / "dataset" / "dev_20.jsonl").write_bytes(
            b"\n".join(r if isinstance(r, bytes) else dumps(r) for r in rows)
        )

    _, samples, quarantine, _ = run("mmdocrag", build)
    whole = [q for q in quarantine if not q["reason"].startswith("dropped quote")]  # drops are per quote
    lines = sum(bool((r if isinstance(r, bytes) else dumps(r)).decode("utf-8", "replace").strip()) for r in rows)
    assert len(samples) + len(whole) == lines


# ---------------------------------------------------------------------------- mragbench

MRAG_IMAGE = pa.struct([pa.field("bytes", pa.binary()), pa.field("path", pa.string())])
MRAG_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("image", MRAG_IMAGE),
        ("gt_images", pa.list_(MRAG_IMAGE)),
        ("question", pa.string()),
        ("A", pa.string()),
        ("B", pa.string()),
        ("C", pa.string()),
        ("D", pa.string()),
        ("answer_choice", pa.string()),
        ("answer", pa.string()),
        ("retrieved_images", pa.list_(MRAG_IMAGE)),
    ]
)
STRUCT = mostly(
    st.sampled_from([GOOD_JPEG, GOOD_PNG]).map(lambda b: {"bytes": b, "path": None}),
    st.one_of(
        st.sampled_from(list(IMAGES.values())).map(lambda b: {"bytes": b, "path": None}),
        IMAGE_NAME.map(lambda p: {"bytes": None, "path": p}),
        st.none(),
    ),
)
NULLABLE_TEXT = mostly(st.sampled_from(["A", "B", "Paris"]), st.one_of(st.none(), TEXT))
MRAG_ROW = st.fixed_dictionaries(
    {
        "id": mostly(st.integers(0, 6), st.none()),
        "image": STRUCT,
        "gt_images": mostly(st.lists(STRUCT, min_size=1, max_size=2), st.none() | st.just([])),
        "question": NULLABLE_TEXT,
        "A": NULLABLE_TEXT,
        "B": NULLABLE_TEXT,
        "C": NULLABLE_TEXT,
        "D": NULLABLE_TEXT,
        "answer_choice": NULLABLE_TEXT,
        "answer": NULLABLE_TEXT,
        "retrieved_images": st.one_of(st.none(), st.lists(STRUCT, max_size=2)),
    }
)


@FUZZ
@given(rows=st.lists(MRAG_ROW, min_size=1, max_size=6))
def test_mragbench_every_row_is_a_sample_or_a_quarantine_row(rows) -> None:
    def build(root: Path) -> None:
        write_images(root)
        (root / "data").mkdir()
        clean = [
            {k: (v.encode("utf-8", "backslashreplace").decode() if isinstance(v, str) else v) for k, v in row.items()}
            for row in rows
        ]  # Parquet strings are valid UTF-8
        pq.write_table(pa.Table.from_pylist(clean, schema=MRAG_SCHEMA), root / "data" / "test-00000-of-00001.parquet")

    _, samples, quarantine, _ = run("mragbench", build)
    whole = [q for q in quarantine if not q["reason"].startswith("dropped retrieved_images")]
    assert len(samples) + len(whole) == len(rows)
