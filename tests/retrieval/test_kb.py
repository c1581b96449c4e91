"""Knowledge bases load from the fixture JSONL, Parquet, C4/Pyserini rows and wiki-offline."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mmcurate.core.errors import MmcurateError
from mmcurate.retrieval.kb import kb_fingerprint, load_kb
from tests.fixtures.builders import kb


def build_fixture_kb(out: Path) -> Path:
    return kb.build(out)


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_fixture_kb_loads_with_long_documents(tmp_path: Path) -> None:
    kb = load_kb(str(build_fixture_kb(tmp_path)))
    assert kb.column_names == ["doc_id", "modality", "text", "image", "title", "provenance"]
    assert set(kb["modality"].to_pylist()) == {"text"}
    assert 55 <= kb.num_rows <= 70
    assert len(set(kb["doc_id"].to_pylist())) == kb.num_rows
    long_docs = [t for t in kb["text"].to_pylist() if len(t.split()) >= 600]
    assert len(long_docs) >= 4
    assert "saturn-v" in kb["doc_id"].to_pylist()


def test_limit_and_folder_and_fingerprint(tmp_path: Path) -> None:
    path = build_fixture_kb(tmp_path / "kb")
    full = load_kb(str(tmp_path / "kb"))  # a folder of JSONL files
    first = load_kb(str(path), limit=10)
    assert first.num_rows == 10
    assert first["doc_id"].to_pylist() == full["doc_id"].to_pylist()[:10]
    assert kb_fingerprint(full) == kb_fingerprint(load_kb(str(path)))
    assert kb_fingerprint(full) != kb_fingerprint(first)
    edited = full.set_column(
        2, "text", pa.array([t + "!" if i == 5 else t for i, t in enumerate(full["text"].to_pylist())])
    )
    assert kb_fingerprint(edited) != kb_fingerprint(full)


def test_parquet_and_alternative_row_shapes(tmp_path: Path) -> None:
    pq.write_table(
        pa.table({"id": ["a", "b"], "contents": ["alpha text", "beta text"], "extra": [1, 2]}), tmp_path / "p.parquet"
    )
    kb = load_kb(str(tmp_path / "p.parquet"))
    assert kb.select(["doc_id", "title", "text"]).to_pylist() == [
        {"doc_id": "a", "title": "", "text": "alpha text"},
        {"doc_id": "b", "title": "", "text": "beta text"},
    ]
    assert json.loads(kb["provenance"][0].as_py()) == {"corpus": str(tmp_path / "p.parquet"), "id": "a"}
    c4 = write_jsonl(
        tmp_path / "c4.jsonl",
        [{"url": "https://x.org/1", "text": "web page", "timestamp": "2019"}, {"url": "https://x.org/2", "text": ""}],
    )
    assert load_kb(str(c4)).select(["doc_id", "title", "text"]).to_pylist() == [
        {"doc_id": "https://x.org/1", "title": "", "text": "web page"}
    ]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (["{not json"], r"bad\.jsonl:1: invalid JSON"),
        ([{"title": "t", "text": "x"}], r"bad\.jsonl:1: a KB row needs an id"),
        ([{"doc_id": "a", "text": "x"}, {"doc_id": "a", "text": "y"}], r"bad\.jsonl:2: duplicate doc_id 'a'"),
    ],
)
def test_bad_rows_give_one_line_errors(tmp_path: Path, rows: list[object], message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    with pytest.raises(MmcurateError, match=message) as err:
        load_kb(str(path))
    assert "\n" not in str(err.value)


def test_missing_path_and_wrong_suffix(tmp_path: Path) -> None:
    with pytest.raises(MmcurateError, match="KB not found") as err:
        load_kb(str(tmp_path / "nope.jsonl"))
    assert "\n" not in str(err.value)
    (tmp_path / "kb.csv").write_text("a,b\n")
    with pytest.raises(MmcurateError, match="neither .jsonl nor .parquet"):
        load_kb(str(tmp_path / "kb.csv"))


def test_wiki_offline_has_10033_summaries() -> None:
    kb = load_kb("wiki-offline")
    assert kb.num_rows == 10_033
    assert all(kb["text"].to_pylist()[:100])
    assert load_kb("wiki-offline", limit=50).num_rows == 50


def test_several_corpora_search_as_one_and_ids_must_not_clash(tmp_path):
    import json

    from mmcurate.core.errors import MmcurateError
    from mmcurate.retrieval.kb import load_corpora

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps({"doc_id": "x", "title": "X", "text": "Ex."}) + "\n")
    b.write_text(json.dumps({"doc_id": "y", "title": "Y", "text": "Why."}) + "\n")
    assert load_corpora([str(a), str(b)])["doc_id"].to_pylist() == ["x", "y"]
    with pytest.raises(MmcurateError, match="'x' is in both"):
        load_corpora([str(a), str(a)])
