"""Stage II's knowledge base in a plan: pages to embed, encoder hours, disk, and the index.

Pages come from, in order: ``--kb-pages``; Parquet metadata (row counts, no text read); the
``wiki-offline`` summaries (counted); a JSONL KB's first ``SAMPLE_ROWS`` rows, scaled by file
size to the whole KB (exact when the files end within them). ``kb_limit`` caps the count, as in
the flow. A KB not found on this machine is named, unplanned.

Hours: pages over the encoder's pages per second (``throughput.encoder_throughput``). Disk:
float32 vectors (pages x dim x 4 bytes), and, when the KB needs the on-disk store, its records
(about the KB's own size: the store keeps every page's id, title and text, zstd-compressed, so
this is an upper bound for uncompressed sources). The index is what ``plan_index`` picks for
the pages and ``retrieval.memory_gb``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from mmcurate.benchmarks.deflectionbench import RetrievalConfig
from mmcurate.core.errors import MmcurateError
from mmcurate.core.specs import KBPath, MiniLM, OpenClip
from mmcurate.retrieval.index_plan import GIB, plan_index
from mmcurate.retrieval.kb import SUFFIXES, count_documents, wiki_offline_path

from . import throughput

SAMPLE_ROWS = 2_000
MINILM_DIM = 384  # all-MiniLM-L6-v2's embedding width (its model card)


@dataclass(frozen=True)
class KBPlan:
    kb: str
    pages: int | None  # None: the KB is not on this machine and no --kb-pages was given
    pages_from: str
    encoder: str
    dim: int
    pages_per_second: float | None
    throughput_from: str
    source_bytes: int
    memory_gb: float

    @property
    def hours(self) -> float | None:
        return (
            None if self.pages is None or self.pages_per_second is None else self.pages / self.pages_per_second / 3600
        )

    def render(self) -> list[str]:
        if self.pages is None:
            return [f"knowledge base {self.kb}: {self.pages_from}; pass --kb-pages N to plan its embedding"]
        index = plan_index(self.pages, self.dim, self.memory_gb)
        vectors = self.pages * self.dim * 4
        on_disk = index.kind == "ivfpq"
        hours = "-" if self.hours is None else f"{self.hours:,.1f} h"
        records = (
            f"<= {self.source_bytes / GIB:,.2f} GB" if self.source_bytes else "about the KB's size (not found here)"
        )
        disk = f"vectors {vectors / GIB:,.2f} GB" + (
            f" + records {records} in an on-disk store" if on_disk else " (in memory and the index cache)"
        )
        return [
            f"knowledge base {self.kb}: {self.pages:,} pages ({self.pages_from}), {self.dim}-d {self.encoder}",
            f"  embedding: {hours} at {self.pages_per_second or '?'} pages/s ({self.throughput_from})",
            f"  disk: {disk}",
            f"  index: {index.describe()} within retrieval.memory_gb = {self.memory_gb}",
        ]


def plan_kb(cfg: RetrievalConfig, pages: int | None = None) -> KBPlan:
    """The KB part of a DeflectionBench plan (module docstring)."""
    if pages is not None and pages < 0:
        raise MmcurateError(f"--kb-pages must be >= 0, got {pages}")
    found, how, size = (pages, "--kb-pages", _source_bytes(cfg)) if pages is not None else _count(cfg)
    if found is not None and cfg.kb_limit is not None and found > cfg.kb_limit:
        found, how = cfg.kb_limit, f"{how}, capped by kb_limit"
    rate, where = throughput.encoder_throughput(cfg)
    return KBPlan(str(cfg.kb), found, how, _encoder_name(cfg), encoder_dim(cfg), rate, where, size, cfg.memory_gb)


def encoder_dim(cfg: RetrievalConfig) -> int:
    """The text encoder's width, read from its config (no weights are loaded)."""
    spec = cfg.text_encoder
    if isinstance(spec, MiniLM):
        return MINILM_DIM
    assert isinstance(spec, OpenClip)
    beside = spec.checkpoint.expanduser().with_name(f"{spec.arch}.json")
    if beside.is_file():
        return int(json.loads(beside.read_text(encoding="utf-8"))["embed_dim"])
    import open_clip

    config = open_clip.get_model_config(spec.arch)
    if config is None:
        raise MmcurateError(f"open_clip does not know architecture {spec.arch!r}")
    return int(config["embed_dim"])


def _encoder_name(cfg: RetrievalConfig) -> str:
    return "all-MiniLM-L6-v2" if isinstance(cfg.text_encoder, MiniLM) else f"open_clip {cfg.text_encoder.arch}"


def _files(cfg: RetrievalConfig) -> list[Path]:
    if not isinstance(cfg.kb, KBPath):
        return [wiki_offline_path()]
    root = cfg.kb.path.expanduser()
    if root.is_dir():
        return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in SUFFIXES)
    return [root] if root.is_file() else []


def _source_bytes(cfg: RetrievalConfig) -> int:
    return sum(p.stat().st_size for p in _files(cfg))


def _count(cfg: RetrievalConfig) -> tuple[int | None, str, int]:
    files = _files(cfg)
    size = sum(p.stat().st_size for p in files)
    if not files:
        return None, "not found on this machine", 0
    if not isinstance(cfg.kb, KBPath):
        return count_documents(cfg.kb, cfg.kb_limit), "counted", size
    if all(p.suffix == ".parquet" for p in files):
        return sum(pq.ParquetFile(p).metadata.num_rows for p in files), "Parquet metadata", size
    sampled = count_documents(cfg.kb, SAMPLE_ROWS)
    if sampled < SAMPLE_ROWS:
        return sampled, "counted", size
    read = _bytes_of_first_lines(files, SAMPLE_ROWS)
    return round(sampled * size / max(read, 1)), f"estimated from the bytes of its first {SAMPLE_ROWS:,} rows", size


def _bytes_of_first_lines(files: list[Path], lines: int) -> int:
    read = 0
    for path in files:
        with path.open("rb") as handle:
            for line in handle:
                read += len(line)
                lines -= 1
                if not lines:
                    return read
    return read
