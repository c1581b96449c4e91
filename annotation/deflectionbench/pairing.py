"""Stage II of DeflectionBench: knowledge pairing (Algorithm 1, second step).

Each sample keeps the gold contexts its source gives (already in the table) and gets its
negatives: the source's own where it ships labelled distractors (WebQA ``*_negFacts``,
MMDocRAG's non-gold quotes: ``negative_contexts`` non-empty after ingest), otherwise the
ones its source's mining strategy finds (``deflectionbench.mining``, see ``mining``: KB
passages of pages found image-to-text or image-to-image, in the source's own KB
(``mining.<source>.kb``) or else the shared ``retrieval.kb``, or images of the source's own pool;
a source whose strategy is ``source`` is never mined: a sample of it without negatives keeps
none, and Stage III's ``k_min`` decides). What each source's strategy ran as (the query it
searched with, the encoder, a stand-in) is the stage's ``extra["mining"]`` rows, the manifest's
``mining_per_source`` table.

Negatives are de-duplicated by ``context_id`` and by content (same normalised passage
text, or same image hash), never equal a gold context (by id or content) and are capped
at ``max_negatives`` (``benchmarks.deflectionbench.MAX_NEGATIVES``). Ledger rows (stage
``pairing``): ``negatives.source`` or ``negatives.mined`` per sample, verdict ``paired`` (or
``empty`` when none is left), with the count, the context ids and what was removed; a mined sample's detail also holds
``mining``: the leakage filter used and how many candidate passages the miner saw and each
of its rules (gold, answer, overlap) removed. The stage's counts sum those over samples
(``mined_candidates``, ``mined_removed_<rule>``). Samples are never dropped here: Stage
III's ``k_min`` check decides about too few negatives.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import chain, zip_longest
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mmcurate.benchmarks.deflectionbench import MAX_NEGATIVES, PAPER_MINING, RetrievalConfig, SourceMining
from mmcurate.core.errors import MmcurateError
from mmcurate.core.ledger import Decision
from mmcurate.core.plural import counted
from mmcurate.core.records import Context
from mmcurate.core.specs import Descriptor
from mmcurate.core.stages import Stage, StageContext, StageResult, merge_results
from mmcurate.core.tables import rows_to_table
from mmcurate.core.text import normalize
from mmcurate.retrieval.encoders import image_encoder, text_encoder
from mmcurate.retrieval.kb import page_image_documents
from mmcurate.retrieval.kb_pages import KBPages, open_kb_pages
from mmcurate.retrieval.rerank import reranker

from .mining import MinedText, mine_image_negatives, mine_page_image_negatives, mine_text_negatives, query_kind

STAGE = "pairing"
ROW_BATCH = 1024  # rows turned into Python dicts at a time


def content_key(ctx: Mapping[str, Any]) -> tuple[str, str]:
    """What makes two contexts the same evidence: the image hash, or the normalised text."""
    if ctx.get("modality") == "image":
        return ("image", ctx.get("image") or "")
    return ("text", normalize(ctx.get("text") or ""))


def _row(ctx: Context | Mapping[str, Any]) -> dict[str, Any]:
    return ctx.to_row() if isinstance(ctx, Context) else dict(ctx)


def interleave(*lists: Iterable[Any]) -> list[Any]:
    """a0, b0, a1, b1, ...: a cap then keeps the top of every list."""
    marker = object()
    return [x for x in chain.from_iterable(zip_longest(*lists, fillvalue=marker)) if x is not marker]


def select_negatives(
    gold: list[Mapping[str, Any]], candidates: Iterable[Mapping[str, Any]], max_negatives: int
) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """Candidates in order, minus duplicates and gold copies, capped. Returns (kept, removed ids by reason)."""
    gold_ids = {g["context_id"] for g in gold}
    gold_content = {content_key(g) for g in gold}
    seen_ids: set[str] = set()
    seen_content: set[tuple[str, str]] = set()
    kept: list[dict[str, Any]] = []
    removed: dict[str, list[str]] = {"equals_gold": [], "duplicate": [], "empty": [], "over_cap": []}
    for ctx in candidates:
        cid, key = ctx["context_id"], content_key(ctx)
        if not key[1]:
            removed["empty"].append(cid)
        elif cid in gold_ids or key in gold_content:
            removed["equals_gold"].append(cid)
        elif cid in seen_ids or key in seen_content:
            removed["duplicate"].append(cid)
        elif len(kept) >= max_negatives:
            removed["over_cap"].append(cid)
        else:
            kept.append(dict(ctx))
        seen_ids.add(cid)
        seen_content.add(key)
    return kept, {reason: ids for reason, ids in removed.items() if ids}


@dataclass
class PairKnowledge(Stage):
    """Stage II: each sample's negatives, the source's own or mined (see the module docstring)."""

    retrieval: RetrievalConfig
    mining: Mapping[str, SourceMining] = field(default_factory=lambda: dict(PAPER_MINING))
    max_negatives: int = MAX_NEGATIVES
    sources: tuple[str, ...] = ()  # the run's sources (none named: any of them may mine its own pool)
    name = STAGE
    shardable = False  # one task: mining loads the KB and its encoders once

    @property
    def pool_wide(self) -> bool:
        """Only ``image_to_image`` mining searches a pool (the source's own images, eq. 3): a run
        with such a source pairs all its samples at once; every other strategy pairs each sample
        on its own, so a streamed run pairs shard by shard."""
        return not self.sources or any(
            self.mining[s].strategy == "image_to_image" for s in self.sources if s in self.mining
        )

    def merge(self, results: list[StageResult]) -> StageResult:
        """The shards' results with their ``mining`` rows summed per source (what a source's
        strategy ran as: from the first shard that had samples of it to mine) and the
        components and indexes of the first shard that mined."""
        merged = merge_results(results)
        rows: dict[str, dict[str, Any]] = {}
        for result in results:
            for row in result.extra.get("mining", []):
                into = rows.get(row["source"])
                if into is None:
                    rows[row["source"]] = dict(row)
                    continue
                if not into["samples_without_negatives"] and row["samples_without_negatives"]:
                    into["ran_as"] = row["ran_as"]
                into["samples_without_negatives"] += row["samples_without_negatives"]
        merged.extra = {**merged.extra, "mining": [rows[source] for source in sorted(rows)]}
        mined = next((r for r in results if "text_encoder" in r.components), None)
        if mined is not None:
            merged.components = mined.components
            merged.extra["indexes"] = next((r.extra["indexes"] for r in results if r.extra.get("indexes")), [])
        return merged

    def run(self, samples: pa.Table, ctx: StageContext) -> StageResult:
        cfg = self.retrieval
        needs = samples.filter(pc.equal(pc.list_value_length(samples["negative_contexts"]), 0))
        present = sorted(set(samples["source"].to_pylist()))
        unknown = [source for source in present if source not in self.mining]
        if unknown:
            raise MmcurateError(
                f"no mining strategy for {counted(len(unknown), 'source')} {unknown} (deflectionbench.mining)"
            )
        mined = [
            source for source in sorted(set(needs["source"].to_pylist())) if self.mining[source].strategy != "source"
        ]
        if not mined:  # every sample brings its source's negatives (or its source provides none): nothing loads
            result = pair_knowledge(
                samples, MinedText(), {}, ctx.run_id, self.max_negatives, unmined=self._unmined(present)
            )
            result.components = {"negatives": "source-provided for every sample; nothing was mined"}
            result.extra = {"mining": [self._plan(source, needs, {}) for source in present]}
            return result
        kbs: dict[str, KBPages] = {}  # each KB searched (a source's own or the shared one), opened once
        page_docs: dict[str, list[dict[str, Any]]] = {}
        own_kb: dict[str, str] = {}  # source -> its own KB (``mining.<source>.kb``)
        mined_text, mined_images = MinedText(), {}
        ran: dict[str, str] = {}  # source -> what its strategy ran as
        images = image_encoder(cfg.image_encoder).name + (
            " (a classical descriptor standing in for the paper's EVA-CLIP)"
            if isinstance(cfg.image_encoder, Descriptor)
            else ""
        )
        for source in mined:
            group = needs.filter(pc.equal(needs["source"], source))
            mining = self.mining[source]
            strategy, top_k = mining.strategy, mining.top_k
            if strategy == "image_to_image":
                mined_images.update(mine_image_negatives(group, ctx.store, cfg, ctx.index_dir, top_k))
                ran[source] = f"image-to-image over the source's own images, by {images}"
            else:
                searched = mining.retrieval(cfg)  # the source's own KB, else the shared one
                name = str(searched.kb)
                if strategy == "image_to_image_pages" and name not in page_docs:
                    page_docs[name] = page_image_documents(searched.kb, searched.kb_limit)
                if strategy == "image_to_image_pages" and page_docs[name]:
                    found = mine_page_image_negatives(group, page_docs[name], searched, ctx.store, ctx.index_dir, top_k)
                    ran[source] = (
                        f"image-to-image against the first image of "
                        f"{counted(len(page_docs[name]), 'KB page')}, by {images}"
                    )
                else:
                    if name not in kbs:
                        kbs[name] = open_kb_pages(searched, ctx.index_dir)
                    found = mine_text_negatives(group, kbs[name], searched, ctx.store, top_k)
                    ran[source] = f"image-to-text, queried with {query_kind(cfg)}"
                    if strategy == "image_to_image_pages":
                        ran[source] = f"the KB names no page image, so {ran[source]}"
                if mining.kb is not None:
                    own_kb[source] = name
                    ran[source] += f"; over its own knowledge base {name}"
                mined_text.negatives.update(found.negatives)
                mined_text.filtered.update(found.filtered)
        result = pair_knowledge(
            samples,
            mined_text,
            mined_images,
            ctx.run_id,
            self.max_negatives,
            cfg.leakage_filter,
            self._unmined(present),
        )
        result.components = {
            "text_encoder": text_encoder(cfg.text_encoder).name,
            "image_encoder": image_encoder(cfg.image_encoder).name,
            "reranker": reranker(cfg.reranker).name,
            "chunking": f"{cfg.chunk_size} {cfg.chunk_unit}, overlap {cfg.chunk_overlap}, sentence boundaries",
            "knowledge_base": str(cfg.kb) + "".join(f"; {source}: {name}" for source, name in sorted(own_kb.items())),
            "leakage_filter": cfg.leakage_filter,
        }
        # kind, parameters, measured recall, build time of the KB index searched
        result.extra = {
            "indexes": [kb.record() for kb in kbs.values() if len(kb)],
            "mining": [self._plan(source, needs, ran) for source in present],
        }
        return result

    def _unmined(self, sources: list[str]) -> frozenset[str]:
        return frozenset(source for source in sources if self.mining[source].strategy == "source")

    def _plan(self, source: str, needs: pa.Table, ran: Mapping[str, str]) -> dict[str, Any]:
        """The manifest's row of ``source``: its strategy and top-k, its samples that came without
        negatives, and what its strategy ran as for them."""
        strategy = self.mining[source]
        without = pc.sum(pc.equal(needs["source"], source)).as_py() or 0
        if source in ran:
            ran_as = ran[source]
        elif strategy.strategy == "source":
            ran_as = "no retrieval: the negatives the source provides"
        else:
            ran_as = "nothing to mine: every sample came with its source's negatives"
        return {
            "source": source,
            "strategy": strategy.strategy,
            "top_k": None if strategy.strategy == "source" else strategy.top_k,
            "samples_without_negatives": without,
            "ran_as": ran_as,
        }


def pair_knowledge(
    samples: pa.Table,
    mined_text: MinedText,
    mined_images: dict[str, list[Context]],
    run_id: str,
    max_negatives: int = MAX_NEGATIVES,
    leakage_filter: str | None = None,
    unmined: frozenset[str] = frozenset(),
) -> StageResult:
    """Attach each sample's negatives (source's, else mined); see the module docstring.
    ``leakage_filter``: the miner's, recorded with its counts (None: nothing was mined);
    ``unmined``: the sources whose strategy is ``source`` (their samples keep what they came with)."""
    if max_negatives < 1:
        raise ValueError(f"max_negatives must be at least 1, got {max_negatives}")
    decisions: list[Decision] = []
    paired: list[pa.Table] = []
    counts: Counter[str] = Counter()
    for batch in samples.to_batches(max_chunksize=ROW_BATCH):  # Python rows for one batch at a time
        out = [
            _pair(
                row,
                mined_text,
                mined_images,
                max_negatives,
                leakage_filter,
                decisions,
                counts,
                row["source"] in unmined,
            )
            for row in batch.to_pylist()
        ]
        paired.append(rows_to_table(out, samples.schema))
    kept = pa.concat_tables(paired) if paired else samples.schema.empty_table()
    return StageResult(stage=STAGE, kept=kept, decisions=decisions, run_id=run_id, counts=dict(counts))


def _pair(
    row: dict[str, Any],
    mined_text: MinedText,
    mined_images: dict[str, list[Context]],
    max_negatives: int,
    leakage_filter: str | None,
    decisions: list[Decision],
    counts: Counter[str],
    unmined: bool,
) -> dict[str, Any]:
    """``row`` with its negatives; its ledger decision is appended to ``decisions``, its
    mining counts added to ``counts``."""
    sid = row["sample_id"]
    source_negs = row["negative_contexts"] or []
    mining: dict[str, Any] | None = None
    if source_negs or unmined:
        check, candidates = "negatives.source", source_negs
        offered = {"source": len(source_negs)}
    else:
        text = [_row(c) for c in mined_text.negatives.get(sid, [])]
        image = [_row(c) for c in mined_images.get(sid, [])]
        check, candidates = "negatives.mined", interleave(text, image)
        offered = {"text": len(text), "image": len(image)}
        if sid in mined_text.filtered:
            filtered = mined_text.filtered[sid]
            mining = {
                "leakage_filter": leakage_filter,
                "candidates": filtered["candidates"],
                "removed": {rule: n for rule, n in filtered.items() if rule != "candidates"},
            }
            counts["mined_candidates"] += filtered["candidates"]
            counts.update({f"mined_removed_{rule}": n for rule, n in mining["removed"].items()})
    negatives, removed = select_negatives(row["gold_contexts"] or [], candidates, max_negatives)
    row["negative_contexts"] = negatives
    detail: dict[str, Any] = {
        "count": len(negatives),
        "context_ids": [c["context_id"] for c in negatives],
        "modalities": {m: sum(c["modality"] == m for c in negatives) for m in ("text", "image")},
        "offered": offered,
    }
    if removed:
        detail["removed"] = removed
    if mining is not None:
        detail["mining"] = mining
    decisions.append(Decision(sid, STAGE, check, "paired" if negatives else "empty", detail=detail))
    return row
