"""Stage II's result over streamed shards (issue 36 item 2): the manifest's per-source mining rows
sum the shards' samples without negatives and say what a source's strategy ran as where it ran;
the components and indexes are those of a shard that mined."""

from __future__ import annotations

import pyarrow as pa

from mmcurate.annotation.deflectionbench.pairing import PairKnowledge
from mmcurate.benchmarks.deflectionbench import RetrievalConfig
from mmcurate.core.stages import StageResult

NOTHING = "nothing to mine: every sample came with its source's negatives"
RAN = "image-to-text, queried with the question text"
SOURCE = "no retrieval: the negatives the source provides"


def _row(source: str, strategy: str, without: int, ran_as: str) -> dict:
    return {
        "source": source,
        "strategy": strategy,
        "top_k": None if strategy == "source" else 10,
        "samples_without_negatives": without,
        "ran_as": ran_as,
    }


def _result(rows: list[dict], components: dict, indexes: list | None = None, kept: int = 2) -> StageResult:
    extra = {"mining": rows, **({"indexes": indexes} if indexes is not None else {})}
    return StageResult(
        stage="pairing",
        kept=pa.table({"sample_id": [f"s{i}" for i in range(kept)]}),
        extra=extra,
        components=components,
        counts={"mined_candidates": kept},
    )


def test_mining_rows_are_summed_and_the_shard_that_mined_names_the_run():
    quiet = _result(
        [_row("infoseek", "image_to_text", 0, NOTHING), _row("webqa", "source", 1, SOURCE)],
        {"negatives": "source-provided for every sample; nothing was mined"},
    )
    mined = _result(
        [_row("infoseek", "image_to_text", 3, RAN), _row("webqa", "source", 2, SOURCE)],
        {"text_encoder": "minilm", "leakage_filter": "none"},
        indexes=[{"kind": "flat"}],
    )
    merged = PairKnowledge(RetrievalConfig(), sources=("infoseek", "webqa")).merge([quiet, mined, quiet])
    assert merged.extra["mining"] == [_row("infoseek", "image_to_text", 3, RAN), _row("webqa", "source", 4, SOURCE)]
    assert merged.components == {"text_encoder": "minilm", "leakage_filter": "none"}
    assert merged.extra["indexes"] == [{"kind": "flat"}]
    assert merged.kept.num_rows == 6 and merged.counts == {"mined_candidates": 6}


def test_one_shard_merges_to_itself():
    only = _result([_row("webqa", "source", 0, SOURCE)], {"negatives": "source-provided"})
    merged = PairKnowledge(RetrievalConfig(), sources=("webqa",)).merge([only])
    assert merged.extra == only.extra and merged.components == only.components
