"""Statistics tables of a DeflectionBench run: the paper's Tables 2 and 3 and the funnel."""
from __future__ import annotations

from collections import Counter

import pyarrow as pa


def _modality(contexts: list[dict]) -> str:
    kinds = {c["modality"] for c in contexts}
    return "+".join(sorted(kinds)) if kinds else "none"


def per_source_table(ingested: dict[str, int], kept: pa.Table) -> list[dict]:
    """Retained samples per source, retention %, query and context modality (Table 2)."""
    rows = kept.to_pylist()
    by_source: dict[str, list[dict]] = {}
    for row in rows:
        by_source.setdefault(row["source"], []).append(row)
    table = []
    for source in sorted(ingested):
        items = by_source.get(source, [])
        query = Counter("image+text" if r["images"] else "text" for r in items)
        context = Counter(_modality(r["gold_contexts"] + r["negative_contexts"]) for r in items)
        table.append(
            {
                "source": source,
                "ingested": ingested[source],
                "retained": len(items),
                "retention_pct": round(100.0 * len(items) / ingested[source], 2) if ingested[source] else 0.0,
                "query_modality": ", ".join(sorted(query)) or "-",
                "context_modality": ", ".join(sorted(context)) or "-",
            }
        )
    return table


def global_table(kept: pa.Table) -> list[dict]:
    """Global statistics of the retained set (Table 3)."""
    rows = kept.to_pylist()
    n = len(rows)

    def mean(values: list[float]) -> float:
        return round(sum(values) / len(values), 2) if values else 0.0

    negatives = [r["negative_contexts"] for r in rows]
    stats = {
        "samples": n,
        "sources": len({r["source"] for r in rows}),
        "with_query_image_pct": round(100.0 * sum(bool(r["images"]) for r in rows) / n, 2) if n else 0.0,
        "mean_question_words": mean([len(r["question"].split()) for r in rows]),
        "mean_answer_words": mean([len(r["answers"][0].split()) for r in rows if r["answers"]]),
        "mean_gold_contexts": mean([len(r["gold_contexts"]) for r in rows]),
        "mean_negatives": mean([len(c) for c in negatives]),
        "text_negatives": sum(1 for cs in negatives for c in cs if c["modality"] == "text"),
        "image_negatives": sum(1 for cs in negatives for c in cs if c["modality"] == "image"),
        "unique_images": len({s for r in rows for s in r["images"]}
                             | {c["image"] for r in rows for c in r["gold_contexts"] + r["negative_contexts"] if c["image"]}),
    }
    return [{"statistic": key, "value": value} for key, value in stats.items()]


def funnel(ingested: int, quarantined: int, after_gating: int, after_pairing: int, released: int) -> list[dict]:
    return [
        {"stage": "ingested", "remaining": ingested},
        {"stage": "quarantined (not samples)", "remaining": quarantined},
        {"stage": "I parametric gating", "remaining": after_gating},
        {"stage": "II knowledge pairing", "remaining": after_pairing},
        {"stage": "III quality control", "remaining": released},
    ]


def calls_table(stage_rows: dict[str, list[dict]], naive: dict[str, int]) -> list[dict]:
    """Model calls per stage and model, with the naive count (every model on every item)."""
    rows = []
    for stage, counted in stage_rows.items():
        for row in counted:
            rows.append({**row, "pipeline_stage": stage})
        rows.append({"stage": "total", "model": "*", "pipeline_stage": stage,
                     "calls": sum(r["calls"] for r in counted),
                     "cache_hits": sum(r["cache_hits"] for r in counted),
                     "failures": sum(r["failures"] for r in counted),
                     "naive": naive.get(stage, 0)})
    return rows
