"""Streaming KB readers: the incremental JSON member reader, Wiki6M, KILT, passages."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmcurate.core.errors import SourceError
from mmcurate.sources.kb_readers import (
    iter_object_members,
    read_encyclopedic_kb,
    read_kilt,
    read_wiki6m,
    title_key,
    word_window,
)

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(
    obj=st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=6),
    chunk=st.integers(1, 40),
    indent=st.sampled_from([None, 1]),
)
def test_members_equal_json_load_at_any_chunk_size(tmp_path_factory, obj, chunk, indent) -> None:
    path = tmp_path_factory.mktemp("members") / "obj.json"
    path.write_text(json.dumps(obj, indent=indent, ensure_ascii=bool(chunk % 2)), encoding="utf-8")
    assert dict(iter_object_members(path, chunk_chars=chunk)) == json.loads(path.read_text(encoding="utf-8"))


def test_number_cut_by_the_buffer_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "n.json"
    path.write_text('{"a": 1234567890, "b": -0.000125e3, "c": true}')
    for chunk in range(1, 12):
        assert dict(iter_object_members(path, chunk_chars=chunk)) == {"a": 1234567890, "b": -0.125, "c": True}


def test_wanted_members_only_and_early_stop(tmp_path: Path) -> None:
    path = tmp_path / "kb.json"
    # everything after the last wanted member is garbage: an early stop never reads it
    path.write_text('\ufeff{"x": [1, 2], "want": {"t": "é"}, "y": 3, "also": null, "z": !!! broken')
    assert list(iter_object_members(path, {"want", "also"}, chunk_chars=4)) == [("want", {"t": "é"}), ("also", None)]
    with pytest.raises(SourceError, match=r"kb.json: invalid JSON at character \d+"):
        dict(iter_object_members(path, chunk_chars=4))


def test_not_an_object_and_truncated_files(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('["a", "b"]')
    with pytest.raises(SourceError, match=r"expected '\{' at character 0, found '\['"):
        list(iter_object_members(path))
    path.write_text('{"a": {"b": "unterminated')
    with pytest.raises(SourceError, match="invalid JSON"):
        list(iter_object_members(path, chunk_chars=5))
    path.write_text('{"a": 1')
    with pytest.raises(SourceError, match="found end of file"):
        list(iter_object_members(path))
    path.write_text("{}")
    assert list(iter_object_members(path)) == []


def test_value_size_cap(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"big": "x" * 1000}))
    with pytest.raises(SourceError, match="exceeds 100 characters"):
        list(iter_object_members(path, chunk_chars=8, max_value_chars=100))


def test_encyclopedic_kb_entries_and_bad_entry(tmp_path: Path) -> None:
    path = tmp_path / "encyclopedic_kb_wiki.json"
    path.write_text(
        json.dumps(
            {
                "u1": {
                    "title": "One",
                    "section_titles": ["One", "History"],
                    "section_texts": ["lead", "past"],
                    "url": "u1",
                },
                "u2": {"title": "Two", "section_texts": "not a list"},
                "u3": {"title": "Three", "section_titles": [], "section_texts": []},
            }
        )
    )
    load = read_encyclopedic_kb(path, {"u1", "u2"})
    assert list(load.entries) == ["u1"]
    assert load.entries["u1"].section_texts == ("lead", "past") and load.entries["u1"].title == "One"
    [problem] = load.problems
    assert problem.locator == "encyclopedic_kb_wiki.json:u2"
    assert problem.reason == "unreadable KB entry: section_texts is not a list of strings"


def test_wiki6m_gz_reads_only_wanted_entities(tmp_path: Path) -> None:
    path = tmp_path / "Wiki6M_ver_1_0.jsonl.gz"
    lines = [
        json.dumps(
            {
                "wikidata_id": "Q1",
                "wikipedia_title": "Universe",
                "wikipedia_content": "All of space.",
                "wikipedia_summary": "Everything.",
            }
        ),
        '{"wikidata_id": "Q2", "wikipedia_title": "Cut',
        '{"wikidata_id": "Q3", "this line is broken but nobody wants Q3',
        "",
        json.dumps({"wikidata_id": "Q2", "wikipedia_title": "Second", "wikipedia_content": "Text."}),
    ]
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    load = read_wiki6m(path, {"Q2", "Q9"})
    assert list(load.entries) == ["Q2"]
    assert load.entries["Q2"].summary is None and load.entries["Q2"].content == "Text."
    assert [(p.locator, p.reason.split(":")[0]) for p in load.problems] == [
        ("Wiki6M_ver_1_0.jsonl.gz:2", "unreadable KB entry")
    ]


def test_kilt_both_text_shapes_ids_and_titles(tmp_path: Path) -> None:
    path = tmp_path / "kb.jsonl"
    anchor = {"wikipedia_id": "7", "wikipedia_title": "Seven"}
    rows = [
        {
            "wikipedia_id": "5",
            "wikipedia_title": "Five",
            "text": ["Five\n", "Five is a number.\n"],
            "anchors": [anchor],
        },
        {"kilt_id": "6", "wikipedia_id": "6", "wikipedia_title": "Six", "text": {"paragraph": ["Six\n", "Six."]}},
        {"wikipedia_id": "7", "wikipedia_title": "Seven", "text": "not paragraphs"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    load = read_kilt(path, {"5", title_key(" SIX "), "7"})
    assert load.entries["5"].paragraphs == ("Five\n", "Five is a number.\n")
    assert load.entries[title_key("six")].wikipedia_id == "6"
    assert "7" not in load.entries  # the anchor in line 1 names 7, but only line 3 is article 7
    assert [p.locator for p in load.problems] == ["kb.jsonl:3"]


def test_word_window() -> None:
    text = "one two  three Four five\nsix seven eight"
    assert word_window(text, text.index("Four"), 3) == (2, "three Four five")
    assert word_window(text, text.index("eight"), 4) == (4, "five\nsix seven eight")
    assert word_window(text, 0, 100) == (0, text)
    assert word_window("", 0, 5) == (0, "")
