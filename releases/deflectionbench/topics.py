"""Topic distribution before and after curation (seed 003, appendix C, Figure 4), in one of
two readings (``deflectionbench.topics.reading``):

- ``bertopic`` (the paper's): BERTopic over the question embeddings of the pool that entered
  Stage I (``topic_model``); a released sample keeps the topic it had there, so "before" and
  "after" count the same clusters. A pool smaller than ``topics.min_samples`` cannot be
  clustered meaningfully: the source fields are read instead and the card says so.
- ``source_fields``: the category a source already ships, read from the sample's ``meta``
  (what the adapters in ``sources/`` keep): the first non-empty field of

| source    | fields                      |
|-----------|-----------------------------|
| webqa     | ``topic``, ``Qcate``        |
| evqa      | ``dataset_name``, ``question_type`` |
| mragbench | ``aspect``, ``scenario``    |
| infoseek  | ``data_split``              |
| mmdocrag  | ``domain``                  |

  A topic is named ``<source>/<value>``; a source without such a field (ViQuAE), or a sample
  whose fields are empty, counts as ``<source>/(no topic field)`` or ``<source>/(empty)``.

Every sample of the pool gets a ledger row (stage ``topics``, check ``topic.<reading>``,
verdict the topic), so ``mmcurate why`` shows it and a re-curation counts its kept samples
in the parent's clusters without clustering again (``inherited_topics``). Nothing drops out
of the totals.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mmcurate.benchmarks.deflectionbench import TopicsConfig
from mmcurate.core.ledger import Decision
from mmcurate.core.plural import counted
from mmcurate.core.schema import LEDGER
from mmcurate.retrieval.encoders import text_encoder

from ..manifest_model import Manifest
from .topic_model import bertopic_topics, fitted_topics

STAGE = "topics"  # the ledger's stage of the topic rows
TOPIC_COLUMNS = ["sample_id", "source", "meta", "question"]  # what ``assign_topics`` reads of the pool

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
    read: Any = meta
    if isinstance(meta, str):
        try:
            read = json.loads(meta or "{}")
        except json.JSONDecodeError:
            read = {}
    values = [str((read or {}).get(name) or "").strip() for name in fields]
    return f"{source}/{next((v for v in values if v), '(empty)')}"


@dataclass(frozen=True)
class TopicReading:
    """The topics of a pool: which reading ran, each sample's topic (at least every sample that
    can be released), the counts before curation, one sentence for the card, and whether this
    run adds the ledger rows (``decisions``, ``ledger``; not when they are inherited)."""

    reading: str
    of: Mapping[str, str]
    before: Mapping[str, int]
    note: str
    recorded: bool = False  # this run assigned the topics: one ledger row per sample

    @property
    def decisions(self) -> list[Decision]:
        """The ledger rows this run adds, as decisions (``ledger`` builds the same rows as a table)."""
        return (
            [Decision(sid, STAGE, f"topic.{self.reading}", topic) for sid, topic in self.of.items()]
            if self.recorded
            else []
        )

    def ledger(self, run_id: str) -> pa.Table:
        """The rows of ``decisions`` as a LEDGER table, made column by column (a million samples
        never become Python objects twice)."""
        n = len(self.of) if self.recorded else 0
        ids = pa.array(list(self.of) if n else [], pa.string())
        return pa.table(
            {
                "sample_id": ids,
                "stage": pa.array([STAGE] * n, pa.string()),
                "check": pa.array([f"topic.{self.reading}"] * n, pa.string()),
                "model": pa.nulls(n, pa.string()),
                "context_id": pa.nulls(n, pa.string()),
                "verdict": pa.array(list(self.of.values()) if n else [], pa.string()),
                "detail": pa.array(["{}"] * n, pa.string()),
                "run_id": pa.array([run_id] * n, pa.string()),
            },
            schema=LEDGER,
        )

    def after(self, sample_ids: Sequence[str]) -> dict[str, int]:
        """Samples per topic among ``sample_ids``, most frequent first."""
        return _sorted(Counter(self.of[sid] for sid in sample_ids))

    def table(self, sample_ids: Sequence[str]) -> list[dict[str, Any]]:
        """The card's topic table for the released ``sample_ids``."""
        return topic_table(self.before, self.after(sample_ids))


def _sorted(counts: Mapping[str, int]) -> dict[str, int]:
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _reading(reading: str, of: dict[str, str], note: str) -> TopicReading:
    return TopicReading(reading, of, _sorted(Counter(of.values())), note, recorded=True)


def source_field_topics(samples: pa.Table) -> dict[str, str]:
    """sample id -> its source fields' topic."""
    return {
        sid: topic_of(source, meta)
        for sid, source, meta in zip(
            samples["sample_id"].to_pylist(), samples["source"].to_pylist(), samples["meta"].to_pylist()
        )
    }


SOURCE_FIELDS_NOTE = (
    "each source's own category field (releases/deflectionbench/topics.py), not the paper's BERTopic clusters"
)


def assign_topics(samples: pa.Table, cfg: TopicsConfig, seed: int) -> TopicReading:
    """The topics of the pool ``samples`` in the configured reading (module docstring)."""
    n = samples.num_rows
    if cfg.reading == "source_fields":
        return _reading(
            "source_fields", source_field_topics(samples), f"topics.reading source_fields: {SOURCE_FIELDS_NOTE}"
        )
    if n < cfg.min_samples:
        return _reading(
            "source_fields",
            source_field_topics(samples),
            f"topics.reading bertopic asked, but {counted(n, 'question')} are fewer than topics.min_samples "
            f"({cfg.min_samples}) to cluster, so the source fields were read: {SOURCE_FIELDS_NOTE}",
        )
    encoder = text_encoder(cfg.text_encoder)
    questions = samples["question"].to_pylist()
    if cfg.fit_sample is None or n <= cfg.fit_sample:
        topics, params = bertopic_topics(questions, encoder.encode_text(questions), cfg, seed)
        fitted = (
            f"BERTopic over {counted(n, 'question')}"
            if cfg.fit_sample is None
            else f"BERTopic over {counted(n, 'question')} (topics.fit_sample {cfg.fit_sample:,}: all of them)"
        )
    else:
        fit = sorted(random.Random(seed).sample(range(n), cfg.fit_sample))
        topics, params = fitted_topics(questions, encoder.encode_text, fit, cfg, seed)
        fitted = (
            f"BERTopic fitted on a seeded subsample of {counted(cfg.fit_sample, 'question')} "
            f"(topics.fit_sample, seed {seed}; not the paper's, which clusters the whole pool), the other "
            f"{n - cfg.fit_sample:,} of {n:,} assigned to its clusters by BERTopic's transform"
        )
    sizes = ", ".join(f"{k} {v}" for k, v in params.items())
    note = (
        f"topics.reading bertopic: {fitted}, embedded with {encoder.name} "
        f"(a stand-in for the paper's text-embedding-3-large; {sizes}); each topic is named by its "
        "c-TF-IDF keywords, not by GPT-4o as in the paper"
    )
    return _reading("bertopic", dict(zip(samples["sample_id"].to_pylist(), topics)), note)


def topic_table(before: Mapping[str, int], after: Mapping[str, int]) -> list[dict[str, Any]]:
    """One row per topic: counts and shares (%) before and after curation, and the share kept."""
    total_before, total_after = sum(before.values()), sum(after.values())
    rows = []
    for topic in sorted(set(before) | set(after), key=lambda t: (-before.get(t, 0), -after.get(t, 0), t)):
        b, a = before.get(topic, 0), after.get(topic, 0)
        rows.append(
            {
                "topic": topic,
                "before": b,
                "before_pct": round(100.0 * b / total_before, 2) if total_before else 0.0,
                "after": a,
                "after_pct": round(100.0 * a / total_after, 2) if total_after else 0.0,
                "retained_pct": round(100.0 * a / b, 2) if b else None,
            }
        )
    return rows


def inherited_topics(manifest: Manifest, ledger: pa.Table, samples: pa.Table) -> TopicReading | None:
    """A re-curation's topics: the parent's counts before curation and each of its ``samples``'
    topic as the parent assigned it (its ledger rows; the source fields for a parent that read
    them, or made before the ledger held topics); None when the parent recorded no counts."""
    statistics = manifest.statistics
    before = {row["topic"]: int(row["before"]) for row in statistics.get("topics") or [] if row["before"]}
    if not before:
        return None
    recorded = next((row for row in statistics.get("readings") or [] if row.get("setting") == "topics"), None)
    if recorded is None or recorded["value"] != "bertopic":
        note = recorded["reading"] if recorded else f"topics.reading source_fields: {SOURCE_FIELDS_NOTE}"
        return TopicReading("source_fields", source_field_topics(samples), before, note)
    rows = ledger.filter(pc.equal(ledger["stage"], STAGE))
    of = dict(zip(rows["sample_id"].to_pylist(), rows["verdict"].to_pylist()))
    return TopicReading("bertopic", of, before, recorded["reading"])
