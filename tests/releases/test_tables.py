"""DeflectionBench release statistics: Table 3 counts and the topic distribution."""

from __future__ import annotations

import json

from mmcurate.benchmarks.deflectionbench import TopicsConfig
from mmcurate.core.ledger import ledger_table
from mmcurate.releases.deflectionbench.draft import global_table
from mmcurate.releases.deflectionbench.topics import assign_topics, inherited_topics, topic_of
from mmcurate.releases.manifest_model import Manifest
from mmcurate.releases.plots import png_bytes, topics_figure


def manifest(statistics: dict) -> Manifest:
    return Manifest(benchmark="deflectionbench", version="1.0.0", counts={}, shards={}, files={}, statistics=statistics)


def test_table3_counts_unique_questions_and_query_images_only(make):
    rows = [
        make.sample(
            "a",
            "What is the name of this mountain?",
            ["K2"],
            images=["aa" * 32],
            negatives=[make.image("n1", "cc" * 32)],
        ),
        make.sample(
            "b", "what is the name of this  mountain", ["Fuji"], images=["bb" * 32], gold=[make.image("g", "dd" * 32)]
        ),
        make.sample("c", "Who built it?", ["Eiffel"], images=["aa" * 32], source="webqa"),
    ]
    stats = {r["statistic"]: r["value"] for r in global_table(make.table(rows))}
    assert stats["samples"] == 3
    assert stats["unique_questions"] == 2  # the same question up to case, spacing and punctuation
    assert stats["unique_query_images"] == 2  # context images cc.., dd.. do not count
    assert "unique_images" not in stats


def test_topic_of_reads_each_sources_field():
    assert topic_of("webqa", json.dumps({"Qcate": "color", "topic": "animals"})) == "webqa/animals"
    assert topic_of("webqa", {"Qcate": "color", "topic": ""}) == "webqa/color"  # first non-empty field
    assert topic_of("evqa", {"dataset_name": "inaturalist", "question_type": "templated"}) == "evqa/inaturalist"
    assert topic_of("mragbench", {"aspect": "Perspective", "scenario": "Angle"}) == "mragbench/Perspective"
    assert topic_of("infoseek", {"data_split": "val_unseen_entity"}) == "infoseek/val_unseen_entity"
    assert topic_of("mmdocrag", {"domain": "Finance"}) == "mmdocrag/Finance"
    assert topic_of("viquae", {"kilt_id": "x"}) == "viquae/(no topic field)"
    assert topic_of("mmdocrag", "{}") == "mmdocrag/(empty)"


def test_topic_table_before_and_after(make):
    pool = make.table(
        [
            make.sample(str(i), "Q?", ["a"], source="webqa", meta={"topic": t})
            for i, t in enumerate(["travel", "travel", "travel", "animals"])
        ]
    )
    topics = assign_topics(pool, TopicsConfig(reading="source_fields"), 0)
    assert topics.reading == "source_fields" and topics.before == {"webqa/travel": 3, "webqa/animals": 1}
    kept = pool["sample_id"].to_pylist()[:1]
    rows = {r["topic"]: r for r in topics.table(kept)}
    assert rows["webqa/travel"] == {
        "topic": "webqa/travel",
        "before": 3,
        "before_pct": 75.0,
        "after": 1,
        "after_pct": 100.0,
        "retained_pct": 33.33,
    }
    assert rows["webqa/animals"]["after"] == 0 and rows["webqa/animals"]["retained_pct"] == 0.0
    assert [(d.stage, d.check, d.verdict) for d in topics.decisions][0] == (
        "topics",
        "topic.source_fields",
        "webqa/travel",
    )
    statistics = {
        "topics": list(rows.values()),
        "readings": [{"setting": "topics", "value": "source_fields", "reading": topics.note}],
    }
    inherited = inherited_topics(manifest(statistics), ledger_table([], "r"), pool.slice(0, 1))
    assert inherited.before == topics.before and inherited.table(kept) == list(rows.values())
    assert inherited.decisions == []  # the parent's ledger already holds them
    assert inherited_topics(manifest({}), ledger_table([], "r"), pool) is None
    assert png_bytes(topics_figure(list(rows.values())))[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_recuration_counts_its_samples_in_the_parents_bertopic_clusters(make):
    """The parent clustered its pool with BERTopic; its ledger holds each sample's topic, so the
    re-curation counts what it keeps in those clusters without clustering again."""
    from mmcurate.core.ledger import Decision

    pool = make.table([make.sample(str(i), "Q?", ["a"], source="webqa", meta={"topic": "travel"}) for i in range(3)])
    ids = pool["sample_id"].to_pylist()
    rows = [
        Decision(ids[0], "topics", "topic.bertopic", "0_bird_nest"),
        Decision(ids[1], "topics", "topic.bertopic", "1_rocket_launch"),
        Decision(ids[2], "topics", "topic.bertopic", "1_rocket_launch"),
    ]
    statistics = {
        "topics": [{"topic": "0_bird_nest", "before": 5}, {"topic": "1_rocket_launch", "before": 7}],
        "readings": [{"setting": "topics", "value": "bertopic", "reading": "topics.reading bertopic: ..."}],
    }
    inherited = inherited_topics(manifest(statistics), ledger_table(rows, "r"), pool)
    assert inherited.reading == "bertopic" and inherited.before == {"0_bird_nest": 5, "1_rocket_launch": 7}
    assert inherited.after(ids[1:]) == {"1_rocket_launch": 2}  # not the source field "webqa/travel"
