"""Topic distribution before and after curation, from each source's own category field.

The paper (appendix C, Figure 4) clusters questions with BERTopic and names the clusters
with GPT-4o; offline we use the category a source already ships, read from the sample's
``meta`` (what the adapters in ``sources/`` keep): the first non-empty field of

| source    | fields                      |
|-----------|-----------------------------|
| webqa     | ``topic``, ``Qcate``        |
| evqa      | ``dataset_name``, ``question_type`` |
| mragbench | ``aspect``, ``scenario``    |
| infoseek  | ``data_split``              |
| mmdocrag  | ``domain``                  |

A topic is named ``<source>/<value>``; a source without such a field (ViQuAE), or a sample
whose fields are empty, counts as ``<source>/(no topic field)`` or ``<source>/(empty)``, so
nothing drops out of the totals.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from .manifest_model import Manifest

TOPIC_FIELDS: dict[str, tuple[str, ...]] = {
    "webqa": ("topic", "Qcate"),
    "evqa": ("dataset_name", "question_type"),
    "mragbench": ("aspect", "scenario"),
    "infoseek": ("data_split",),
    "mmdocrag": ("domain",),
}


def topic_of(source: str, meta: str | Mapping[str, Any] | None) -> str:
    """The topic of one sample (see the module docstring)."""
    fields = TOPIC_FIELDS.get(source)
    if not fields:
        return f"{source}/(no topic field)"
    if isinstance(meta, str):
        try:
            meta = json.loads(meta or "{}")
        except json.JSONDecodeError:
            meta = {}
    values = [str((meta or {}).get(name) or "").strip() for name in fields]
    return f"{source}/{next((v for v in values if v), '(empty)')}"


def topic_counts(samples: pa.Table) -> dict[str, int]:
    """Samples per topic, most frequent first."""
    topics = Counter(topic_of(s, m) for s, m in zip(samples["source"].to_pylist(), samples["meta"].to_pylist()))
    return dict(sorted(topics.items(), key=lambda kv: (-kv[1], kv[0])))


def topic_table(before: Mapping[str, int], after: Mapping[str, int]) -> list[dict[str, Any]]:
    """One row per topic: counts and shares (%) before and after curation, and the share kept."""
    total_before, total_after = sum(before.values()), sum(after.values())
    rows = []
    for topic in sorted(set(before) | set(after), key=lambda t: (-before.get(t, 0), -after.get(t, 0), t)):
        b, a = before.get(topic, 0), after.get(topic, 0)
        rows.append({
            "topic": topic, "before": b, "before_pct": round(100.0 * b / total_before, 2) if total_before else 0.0,
            "after": a, "after_pct": round(100.0 * a / total_after, 2) if total_after else 0.0,
            "retained_pct": round(100.0 * a / b, 2) if b else None,
        })
    return rows


def inherited_topics(manifest: Manifest) -> dict[str, int] | None:
    """The before-curation counts a release recorded (what its re-curation inherits), or None."""
    rows = manifest.statistics.get("topics") or []
    return {row["topic"]: int(row["before"]) for row in rows if row["before"]} or None
