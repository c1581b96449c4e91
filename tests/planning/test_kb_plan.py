"""The knowledge base in a plan: pages (counted, from Parquet metadata, estimated, or given),
embedding hours at the encoder's throughput, disk, and the index the budget allows."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mmcurate.benchmarks.deflectionbench import RetrievalConfig
from mmcurate.core.errors import MmcurateError
from mmcurate.planning import throughput
from mmcurate.planning.kb import SAMPLE_ROWS, plan_kb
from tests.planning.test_inputs_cli import PAPER
from tests.releases.cli_helpers import run_cli


def jsonl(path: Path, rows: int) -> Path:
    path.write_text(
        "".join(json.dumps({"doc_id": f"d{i}", "title": "T", "text": f"page {i:06d}"}) + "\n" for i in range(rows))
    )
    return path


def test_a_small_kb_is_counted_and_stays_in_memory(tmp_path: Path) -> None:
    plan = plan_kb(RetrievalConfig(kb=str(jsonl(tmp_path / "kb.jsonl", 60))))
    assert (plan.pages, plan.pages_from, plan.dim) == (60, "counted", 384)
    assert plan.pages_per_second == throughput.MINILM_CPU_PAGES_PER_SECOND
    assert plan.hours == pytest.approx(60 / throughput.MINILM_CPU_PAGES_PER_SECOND / 3600)
    text = "\n".join(plan.render())
    assert "60 pages (counted)" in text and "index: flat()" in text and "in memory" in text


def test_a_large_jsonl_kb_is_estimated_from_its_first_rows(tmp_path: Path) -> None:
    rows = SAMPLE_ROWS * 5
    plan = plan_kb(RetrievalConfig(kb=str(jsonl(tmp_path / "kb.jsonl", rows))))
    assert plan.pages_from.startswith("estimated") and abs(plan.pages - rows) <= rows * 0.01  # same-size rows
    capped = plan_kb(RetrievalConfig(kb=str(tmp_path / "kb.jsonl"), kb_limit=100))
    assert capped.pages == 100 and "kb_limit" in capped.pages_from


def test_parquet_metadata_and_given_pages(tmp_path: Path) -> None:
    pq.write_table(pa.table({"doc_id": ["a", "b", "c"], "text": ["x", "y", "z"]}), tmp_path / "kb.parquet")
    cfg = RetrievalConfig(kb=str(tmp_path / "kb.parquet"), encoder_pages_per_second=1000)
    assert (plan_kb(cfg).pages, plan_kb(cfg).pages_from) == (3, "Parquet metadata")
    big = plan_kb(cfg, pages=6_000_000)
    assert big.hours == pytest.approx(6_000_000 / 1000 / 3600) and big.throughput_from == "config"
    text = "\n".join(big.render())
    assert "vectors 8.58 GB" in text and "on-disk store" in text and "ivfpq(" in text
    with pytest.raises(MmcurateError, match="--kb-pages"):
        plan_kb(cfg, pages=-1)


def test_the_papers_kb_on_the_command_line(capsys, monkeypatch) -> None:
    code, out, _ = run_cli(capsys, monkeypatch, "plan", str(PAPER), "--samples", "45900", "--kb-pages", "6000000")
    assert code == 0
    assert "6,000,000 pages (--kb-pages), 768-d open_clip EVA02-L-14" in out  # width from open_clip's config
    assert "vectors 17.17 GB" in out and "nlist=2048" in out and "set retrieval.encoder_pages_per_second" in out
    code, out, _ = run_cli(capsys, monkeypatch, "plan", str(PAPER), "--samples", "45900")
    assert code == 0 and "not found on this machine; pass --kb-pages N" in out
