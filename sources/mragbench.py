"""MRAG-Bench: multiple-choice visual questions whose gold knowledge is a set of images.

Reads every ``*.parquet`` shard under the root (the Hugging Face layout
``data/test-0000k-of-0000n.parquet``) one row group at a time, or, with option
``hf_dataset``, the ``test`` split through ``datasets.load_dataset`` (a hub name resolved
from the local cache, or a local dataset folder; nothing is downloaded when the
``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE`` environment is set, as in tests and CI).
Either way rows arrive as Arrow batches, with images as ``{bytes, path}`` structs.

The query image and every gold image (``gt_images``) must be usable, or the whole sample
is quarantined (a sample without its image or its gold is a different sample). The
benchmark's ``retrieved_images`` are retriever output, not labelled negatives: they are
stored and listed by sha256 in ``meta["retrieved_images"]``; an unusable one is left out
with a quarantine row. ``negative_contexts`` stay empty: negatives are mined later.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from mmcurate.core.errors import ImageRejected, SourceError
from mmcurate.core.plural import counted
from mmcurate.core.records import Context, Rejected, Sample

from .base import AdapterOptions, Located, SourceAdapter, required, text_field

BATCH_ROWS = 64  # rows carry several embedded images each: keep batches small
CHOICES = ("A", "B", "C", "D")
REQUIRED = ("id", "question", "answer", "answer_choice", "image", "gt_images", *CHOICES)


class MRAGBenchOptions(AdapterOptions):
    hf_dataset: str | None = None  # e.g. "uclanlp/MRAG-Bench"; None reads the shards under root
    hf_cache_dir: str | None = None  # datasets cache to read hf_dataset from; None: the HF default


class MRAGBenchSource(SourceAdapter):
    name = "mragbench"
    Options = MRAGBenchOptions
    options: MRAGBenchOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.shards = [] if self.options.hf_dataset else sorted(self.root.rglob("*.parquet"))
        if not self.options.hf_dataset and not self.shards:
            raise SourceError(f"mragbench: no *.parquet shards under {self.root}")

    def source_files(self) -> list[Path]:
        return list(self.shards)

    def count_records(self) -> int | None:
        """Rows in the shards' Parquet footers; None for a Hub dataset (not local)."""
        if self.options.hf_dataset:
            return None
        return sum(pq.ParquetFile(shard).metadata.num_rows for shard in self.shards)

    def records(self) -> Iterator[Located | Rejected]:
        for label, batches in self._batches():
            row_number = 0
            while True:
                try:
                    batch = next(batches)
                except StopIteration:
                    break
                except (pa.ArrowException, OSError) as exc:
                    yield Rejected(f"{label}:{row_number}", f"unreadable Parquet data, rest of shard skipped: {exc}")
                    break
                missing = [c for c in REQUIRED if c not in batch.schema.names]
                if missing:
                    yield Rejected(
                        label, f"shard skipped: it lacks {counted(len(missing), 'column')}: {', '.join(missing)}"
                    )
                    break
                for row in batch.to_pylist():
                    yield from self._row(f"{label}:{row_number}", row)
                    row_number += 1

    def _batches(self) -> Iterator[tuple[str, Iterator[pa.RecordBatch | pa.Table]]]:
        if self.options.hf_dataset:
            yield self.options.hf_dataset, _hub_batches(self.options.hf_dataset, self.options.hf_cache_dir)
            return
        for shard in self.shards:
            yield str(shard.relative_to(self.root)), _shard_batches(shard)

    def _row(self, locator: str, row: dict[str, Any]) -> Iterator[Located | Rejected]:
        raw = _describe(row)
        try:
            for key in ("question", "answer", "answer_choice"):
                text_field(row, key)
            required(row, "id")
        except ValueError as exc:
            yield Rejected(locator, str(exc), raw)
            return
        sample_key = str(row["id"])
        choices = {c: row.get(c) for c in CHOICES}
        gt_images = row.get("gt_images") or []
        if not gt_images:
            yield Rejected(locator, "no gt_images", raw)
            return
        try:
            query = self._image(row.get("image"), "image")
            gold = [
                Context(f"mragbench:{sample_key}:gt{k}", "image", image=self._image(img, f"gt_images[{k}]"))
                for k, img in enumerate(gt_images)
            ]
        except ImageRejected as exc:
            yield Rejected(locator, str(exc), raw)
            return
        retrieved: list[str] = []
        for k, img in enumerate(row.get("retrieved_images") or []):
            try:
                retrieved.append(self._image(img, f"retrieved_images[{k}]"))
            except ImageRejected as exc:
                yield Rejected(locator, f"dropped {exc}", raw)
        answer = row["answer"].strip()
        answers = [answer]
        chosen = choices.get(row["answer_choice"].strip())
        if isinstance(chosen, str) and chosen.strip() and chosen.strip() != answer:
            answers.append(chosen.strip())
        yield Located(
            locator,
            Sample(
                source=self.name,
                source_id=sample_key,
                question=row["question"],
                answers=answers,
                images=[query],
                gold_contexts=gold,
                negative_contexts=[],
                meta={
                    "aspect": row.get("aspect"),
                    "scenario": row.get("scenario"),
                    "image_type": row.get("image_type"),
                    "source": row.get("source"),
                    "choices": choices,
                    "answer_choice": row["answer_choice"],
                    "retrieved_images": retrieved,
                },
            ),
        )

    def _image(self, value: Any, field: str) -> str:
        """Store one ``{bytes, path}`` image struct; ImageRejected names the field."""
        if not isinstance(value, dict):
            raise ImageRejected(f"{field}: not an image struct")
        data = value.get("bytes")
        try:
            if data:
                return self.store.put(data)
            if value.get("path"):  # a non-embedded image: a path relative to the root
                return self.store.put_file(self.root, str(value["path"]))
        except ImageRejected as exc:
            raise ImageRejected(f"{field}: {exc}") from None
        raise ImageRejected(f"{field}: no image bytes or path")


def _shard_batches(path: Path) -> Iterator[pa.RecordBatch]:
    """One shard, a few rows at a time: a shard never has to fit in memory."""
    yield from pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS)


def _hub_batches(name: str, cache_dir: str | None) -> Iterator[pa.Table]:
    """The ``test`` split of ``name`` as Arrow tables; images stay undecoded structs."""
    import datasets  # heavy: imported only when this option is used

    try:
        dataset = datasets.load_dataset(name, split="test", cache_dir=cache_dir)
    except Exception as exc:  # datasets raises many types for a missing or unreadable dataset
        raise SourceError(f"mragbench: cannot load {name!r} (split test) from the local cache: {exc}") from None
    yield from dataset.with_format("arrow").iter(batch_size=BATCH_ROWS)


def _describe(row: dict[str, Any]) -> str:
    """The row for quarantine, with image bytes replaced by their length."""

    def shrink(value: Any) -> Any:
        if isinstance(value, bytes):
            return f"<{len(value)} bytes>"
        if isinstance(value, dict):
            return {k: shrink(v) for k, v in value.items()}
        if isinstance(value, list):
            return [shrink(v) for v in value]
        return value

    return json.dumps(shrink(row), ensure_ascii=False, default=str)
