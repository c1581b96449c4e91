"""One test per bad input: its quarantine reason, and that the rest of the source still ingests.

Bad inputs the issue names that existing tests already pin exactly (reason, locator, and
the exact surviving samples of the same run) are not repeated here:

==============================  =========================================================
bad input                       pinned by
==============================  =========================================================
truncated zst (reddit)          tests/sources/test_reddit.py::test_ingest_quarantine_exact
                                ("RC_2023-02.zst", "truncated zstd stream after line 1")
                                with test_ingest_samples_exact (the rest); reader level:
                                tests/sources/test_zst.py::test_truncated_stream_keeps_complete_frames
invalid UTF-8 line (reddit)     test_reddit.py::test_ingest_quarantine_exact
                                ("RS_2023-01.zst:32", "invalid UTF-8 at byte 37")
corrupt image                   test_reddit.py (RS_2023-01.zst:29 "undecodable image"),
                                test_mragbench.py::test_quarantine_rows ("image: undecodable image"),
                                test_viquae.py::test_quarantine_reasons_and_locators (validation.jsonl:11)
truncated image                 tests/sources/test_infoseek.py::test_quarantine_reasons_and_locators
                                (infoseek_val.jsonl:14, a truncated JPEG: "undecodable image");
                                test_mragbench.py::test_bad_retrieved_image_left_out_of_meta
decompression bomb              test_mragbench.py::test_quarantine_rows
                                ("gt_images[1]: decompression bomb", a PNG claiming 20000x20000)
image path escaping the root    test_mmdocrag.py::test_quarantine_rows ("../../etc/passwd"),
                                test_viquae.py (validation.jsonl:12 "../escape.jpg"),
                                test_infoseek.py (infoseek_val.jsonl:15), test_reddit.py (RS:30)
WebQA lineidx past the file     test_webqa.py::test_quarantine_rows_name_fact_and_reason
                                ("imgs.lineidx offset ... points past imgs.tsv")
==============================  =========================================================

Written here: the oversized Reddit line with the rest of the month intact (the existing
option test only checks the reason), and regressions for bugs the fuzz tests found: each
used to raise out of ``ingest`` (or, for a repeated Reddit post, lose a record silently).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from PIL import Image

from mmcurate.sources.ingest import IngestResult, ingest

ANSWER = (
    "The carving shows a heron standing in reeds. It was made in the late period. Similar pieces are kept in "
    "several museums today, and they were often given as gifts. The style matches the workshops of the river "
    "towns, which used soft stone. Experts date it by the tool marks and the pigment traces left on it."
)


def jpeg(color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 6), color).save(buf, format="JPEG")
    return buf.getvalue()


LINE_BASED = (".jsonl", ".jsonl.gz", ".csv", ".zst", ".parquet")  # a row index stands for a Parquet line


def assert_located(result: IngestResult) -> None:
    """Every quarantine row names one of the run's source files, then the line (line-based
    files), the key or ``char<N>`` (one-object JSON files), or nothing (the whole file)."""
    files = [Path(f).as_posix() for f in result.source_files]
    for locator in pq.read_table(result.quarantine_path)["locator"].to_pylist():
        name, _, where = locator.partition(":")
        assert any(f == name or f.endswith("/" + name) for f in files), (locator, files)
        if name.endswith(LINE_BASED):
            assert where == "" or where.isdigit(), locator
        else:
            assert where, locator


def run(name: str, root: Path, out: Path, **kwargs) -> tuple[list[str], dict[str, str], object]:
    result = ingest(name, root, out, **kwargs)
    assert_located(result)
    samples = [row["source_id"] for row in pq.read_table(result.samples_path).to_pylist()]
    quarantine = {row["locator"]: row["reason"] for row in pq.read_table(result.quarantine_path).to_pylist()}
    return samples, quarantine, result


@pytest.mark.parametrize(
    "source, options",
    [
        ("reddit", {}),
        ("reddit", {"prefilter": False}),
        ("infoseek", {}),
        ("evqa", {}),
        ("webqa", {"include_test": True}),
        ("mmdocrag", {"quotes": "both"}),
        ("mragbench", {}),
        ("viquae", {}),
    ],
)
def test_every_fixture_quarantine_row_is_located_in_a_source_file(
    fixtures_root: Path, tmp_path: Path, source: str, options: dict
) -> None:
    result = ingest(source, fixtures_root / source, tmp_path / "out", options=options)
    assert result.quarantined > 0
    assert_located(result)


# ---------------------------------------------------------------------------- reddit


def reddit_root(root: Path, posts: list[bytes], comments: list[dict]) -> Path:
    (root / "images").mkdir(parents=True)
    (root / "images" / "good.jpg").write_bytes(jpeg())
    rc = [
        json.dumps(
            {
                "link_id": f"t3_{c['post']}",
                "parent_id": f"t3_{c['post']}",
                "id": c["id"],
                "body": ANSWER,
                "author": "someone",
            }
        ).encode()
        for c in comments
    ]
    for name, lines in (("RS_2023-01.zst", posts), ("RC_2023-01.zst", rc)):
        (root / name).write_bytes(zstandard.ZstdCompressor().compress(b"\n".join(lines) + b"\n"))
    return root


def post(
    post_id: str,
    title: str = "What is this carving?",
    url: str = "https://i.redd.it/good.jpg",
    created: object = 1672531200,
    **extra: object,
) -> bytes:
    return json.dumps({"id": post_id, "title": title, "url": url, "created_utc": created, **extra}).encode()


def test_reddit_oversized_line_is_quarantined_and_the_month_goes_on(tmp_path: Path) -> None:
    huge = post("p2", selftext="x" * 5000)
    root = reddit_root(
        tmp_path / "raw", [post("p1"), huge, post("p3")], [{"post": p, "id": f"c{p}"} for p in ("p1", "p2", "p3")]
    )
    samples, quarantine, _ = run("reddit", root, tmp_path / "out", options={"max_line_bytes": 2000})
    assert quarantine == {"RS_2023-01.zst:2": f"line longer than 2000 bytes ({len(huge)})"}
    assert sorted(samples) == ["p1/cp1", "p3/cp3"]


def test_reddit_bad_fields_never_escape(tmp_path: Path) -> None:
    posts = [
        post("ok"),
        post("inf", created=float("inf")),  # written as Infinity, as 1e999 would parse
        post("ipv6", url="https://[i.redd.it/good.jpg"),  # urlsplit raises ValueError
        post("nul", url="https://i.redd.it/a%00b.jpg"),  # a NUL byte in the file name
        post("long", url="https://i.redd.it/" + "x" * 300 + ".jpg"),  # too long for the file system
        post("sur", title="What is this \ud83d?"),  # half an emoji, as pushshift dumps hold
        post("ok", title="What is this again?"),  # the same post twice
    ]
    comments = [{"post": p, "id": f"c-{p}"} for p in ("ok", "inf", "ipv6", "nul", "long", "sur")]
    samples, quarantine, result = run("reddit", reddit_root(tmp_path / "raw", posts, comments), tmp_path / "out")
    assert samples == ["ok/c-ok"]
    assert quarantine["RS_2023-01.zst:2"] == "post inf: created_utc inf is not a number"
    assert quarantine["RS_2023-01.zst:4"].startswith("post nul: unusable image path 'a\\x00b.jpg': ValueError")
    assert quarantine["RS_2023-01.zst:5"].startswith("post long: unusable image path 'xxx")
    assert "File name too long" in quarantine["RS_2023-01.zst:5"]
    assert quarantine["RS_2023-01.zst:7"] == "duplicate post id 'ok'"
    assert quarantine["RC_2023-01.zst:6"] == "text is not valid Unicode: surrogates not allowed"
    assert result.skipped["no_image"] == 1  # the unparseable URL is not an image URL
    assert len(quarantine) == 5


def test_reddit_line_nested_too_deeply_is_quarantined(tmp_path: Path) -> None:
    deep = b'{"a":' * 1200 + b"1" + b"}" * 1200
    posts = [post("p1"), post("p2")[:-1] + b', "extra": ' + deep + b"}"]
    samples, quarantine, _ = run(
        "reddit", reddit_root(tmp_path / "raw", posts, [{"post": "p1", "id": "c1"}]), tmp_path / "out"
    )
    assert samples == ["p1/c1"] and quarantine == {
        "RS_2023-01.zst:2": "malformed JSON: JSON nested too deeply to parse"
    }


def test_reddit_unterminated_string_reason_reads_once(tmp_path: Path) -> None:
    cut = b'{"id": "p2", "url": "https://i.redd.it/good.jpg", "title": "What is this?'
    posts = [post("p1"), cut]
    samples, quarantine, _ = run(
        "reddit", reddit_root(tmp_path / "raw", posts, [{"post": "p1", "id": "c1"}]), tmp_path / "out"
    )
    assert quarantine == {
        "RS_2023-01.zst:2": f"malformed JSON: Unterminated string starting at column {cut.index(b'What')}"
    }


# ---------------------------------------------------------------------------- JSONL sources


def test_invalid_utf8_line_in_a_jsonl_source_is_quarantined(tmp_path: Path) -> None:
    root = tmp_path / "raw"
    (root / "images").mkdir(parents=True)
    (root / "images" / "good.jpg").write_bytes(jpeg())

    def line(ident: str, question: str = "Who is this?") -> bytes:
        return json.dumps(
            {"id": ident, "image": "good.jpg", "input": question, "output": {"answer": ["Paris"]}}
        ).encode()

    bad_in_text = line("v2").replace(b"Who", b"Wh\xff")  # inside a string: the sample cannot be stored
    bad_outside = b"\xff" + line("v3")  # outside any string: the line is not JSON
    (root / "validation.jsonl").write_bytes(b"\n".join([line("v1"), bad_in_text, bad_outside, line("v4")]))
    samples, quarantine, _ = run("viquae", root, tmp_path / "out")
    assert samples == ["v1", "v4"]
    assert quarantine["validation.jsonl:2"] == "text is not valid Unicode: surrogates not allowed"
    assert quarantine["validation.jsonl:3"].startswith("malformed record: Expecting value")


def test_viquae_image_name_too_long_for_the_file_system(tmp_path: Path) -> None:
    root = tmp_path / "raw"
    (root / "images").mkdir(parents=True)
    (root / "images" / "good.jpg").write_bytes(jpeg())
    rows = [
        {"id": i, "image": name, "input": "Who?", "output": {"answer": ["Paris"]}}
        for i, name in (("v1", "x" * 300 + ".jpg"), ("v2", "good.jpg"))
    ]
    (root / "validation.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    samples, quarantine, _ = run("viquae", root, tmp_path / "out")
    assert samples == ["v2"]
    assert quarantine["validation.jsonl:1"].startswith("unusable image path 'xxx")


def test_mmdocrag_img_path_with_nul_byte(tmp_path: Path) -> None:
    root = tmp_path / "raw"
    (root / "images").mkdir(parents=True)
    (root / "images" / "good.jpg").write_bytes(jpeg())
    (root / "dataset").mkdir()

    def question(q_id: int, img_path: str) -> str:
        return json.dumps(
            {
                "q_id": q_id,
                "doc_name": "doc",
                "question": "What?",
                "answer_short": "A",
                "text_quotes": [{"quote_id": "text1", "text": "A.", "page_id": 1, "layout_id": 1}],
                "img_quotes": [{"quote_id": "image1", "img_path": img_path, "page_id": 1, "layout_id": 2}],
                "gold_quotes": ["image1"],
            }
        )

    (root / "dataset" / "dev_20.jsonl").write_text(question(1, "a\x00b.jpg") + "\n" + question(2, "good.jpg"))
    (root / "dataset" / "evaluation_20.jsonl").write_text("")
    samples, quarantine, _ = run("mmdocrag", root, tmp_path / "out")
    assert samples == ["dev_20:2"]
    assert quarantine["dev_20.jsonl:1"].startswith("gold quote image1 unusable: unusable image path 'a\\x00b.jpg'")


# ---------------------------------------------------------------------------- evqa, webqa, mragbench


def test_evqa_infinite_section_id(tmp_path: Path) -> None:
    root = tmp_path / "raw"
    image = root / "GLD" / "a" / "b" / "c" / "abc.jpg"
    image.parent.mkdir(parents=True)
    image.write_bytes(jpeg())
    header = "question,answer,dataset_image_ids,dataset_name,question_type,wikipedia_url,evidence_section_id\n"
    rows = [
        "Where?,Paris,abc,landmarks,automatic,u1,inf",
        "Where?,Paris,abc,landmarks,automatic,u1,1e999",
        "Where?,Paris,abc,landmarks,automatic,u1,0",
    ]
    (root / "val.csv").write_text(header + "\n".join(rows) + "\n")
    samples, quarantine, _ = run("evqa", root, tmp_path / "out")
    assert samples == ["val:2"]
    assert quarantine == {
        "val.csv:2": "evidence_section_id 'inf' is not an integer",
        "val.csv:3": "evidence_section_id '1e999' is not an integer",
    }


def webqa_root(root: Path, train_val: bytes) -> Path:
    import base64

    root.mkdir(parents=True)
    row = f"30000000\t{base64.b64encode(jpeg()).decode()}\n".encode()
    (root / "imgs.tsv").write_bytes(row)
    (root / "imgs.lineidx").write_text("0\n")
    (root / "WebQA_train_val.json").write_bytes(train_val)
    return root


def webqa_record(img_facts: list[dict]) -> dict:
    return {
        "Q": '"What?"',
        "A": ['"Paris"'],
        "split": "train",
        "Qcate": "text",
        "txt_posFacts": [{"fact": "Paris.", "snippet_id": "s1"}],
        "img_negFacts": img_facts,
    }


def test_webqa_infinite_image_id_drops_only_that_fact(tmp_path: Path) -> None:
    records = {"g1": webqa_record([{"image_id": float("inf")}, {"image_id": 30000000}])}
    samples, quarantine, _ = run("webqa", webqa_root(tmp_path / "raw", json.dumps(records).encode()), tmp_path / "out")
    assert samples == ["g1"]
    assert quarantine == {
        "WebQA_train_val.json:g1": "dropped img_negFacts[0]: image fact with image_id inf, not an integer"
    }


def test_webqa_invalid_utf8_keeps_the_records_before_it(tmp_path: Path) -> None:
    good = json.dumps({"g1": webqa_record([])})
    text = good[:-1].encode() + b', "g2": {"Q": "\xff"}, "g3": ' + json.dumps(webqa_record([])).encode() + b"}"
    samples, quarantine, _ = run("webqa", webqa_root(tmp_path / "raw", text), tmp_path / "out")
    assert samples == ["g1"]
    [(locator, reason)] = quarantine.items()
    assert locator.startswith("WebQA_train_val.json:char")
    assert reason.startswith("malformed JSON, rest of file unreadable: invalid UTF-8")


def test_mragbench_image_path_too_long(tmp_path: Path) -> None:
    struct = pa.struct([pa.field("bytes", pa.binary()), pa.field("path", pa.string())])
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("image", struct),
            ("gt_images", pa.list_(struct)),
            ("question", pa.string()),
            ("answer", pa.string()),
            ("answer_choice", pa.string()),
            *[(c, pa.string()) for c in "ABCD"],
        ]
    )
    good = {"bytes": jpeg(), "path": None}
    rows = [
        {
            "id": i,
            "image": good,
            "gt_images": [gold],
            "question": "Which?",
            "answer": "x",
            "answer_choice": "A",
            "A": "x",
            "B": "y",
            "C": "z",
            "D": "w",
        }
        for i, gold in ((1, {"bytes": None, "path": "y" * 300 + ".png"}), (2, good))
    ]
    root = tmp_path / "raw"
    root.mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), root / "test.parquet")
    samples, quarantine, _ = run("mragbench", root, tmp_path / "out")
    assert samples == ["2"]
    assert quarantine["test.parquet:0"].startswith("gt_images[0]: unusable image path 'yyy")
