"""Topics before and after curation by BERTopic (seed 003, appendix C: question embeddings,
UMAP, HDBSCAN), seeded so that two runs give the same topics; small pools adapted, tiny ones
read the source fields and say so (issue 32 item 3)."""

from __future__ import annotations

import pytest

from mmcurate.benchmarks.deflectionbench import TopicsConfig
from mmcurate.releases.deflectionbench.draft import readings_table
from mmcurate.releases.deflectionbench.topic_model import adapted
from mmcurate.releases.deflectionbench.topics import assign_topics

THEMES = {
    "bird": [
        "What species of bird is this?",
        "Which bird nests in this tree?",
        "What does this bird eat?",
        "How far does this bird migrate?",
        "What colour are this bird's eggs?",
        "Where does this bird breed?",
        "How long does this bird live?",
        "What is this bird's wingspan?",
        "Which family is this bird in?",
        "Is this bird endangered?",
    ],
    "rocket": [
        "When did this rocket first launch?",
        "Which agency built this rocket?",
        "What fuel does this rocket burn?",
        "How tall is this rocket?",
        "How many stages does this rocket have?",
        "Where was this rocket launched?",
        "What payload did this rocket carry?",
        "Which engine powers this rocket?",
        "How heavy is this rocket?",
        "When was this rocket retired?",
    ],
    "church": [
        "When was this church built?",
        "Which architect designed this cathedral?",
        "What style is this church?",
        "Which saint is this cathedral named after?",
        "How tall is this church's spire?",
        "In which city is this cathedral?",
        "Who consecrated this church?",
        "How many bells does this church have?",
        "When was this cathedral restored?",
        "What organ does this church have?",
    ],
}


@pytest.fixture(scope="module")
def pool():
    from tests.conftest import sample, table

    rows = [
        sample(f"{theme}{i}", q, ["x"], source="webqa", meta={"topic": theme})
        for theme, questions in THEMES.items()
        for i, q in enumerate(questions)
    ]
    return table(rows)


def test_two_runs_give_the_same_topics_and_the_card_names_the_reading(pool):
    cfg = TopicsConfig()
    first, second = assign_topics(pool, cfg, 13), assign_topics(pool, cfg, 13)
    assert first.reading == "bertopic"
    assert dict(first.of) == dict(second.of) and set(first.of) == set(pool["sample_id"].to_pylist())
    assert len(set(first.of.values())) >= 2  # the three themes do not collapse into one cluster
    assert [(d.check, d.verdict) for d in first.decisions] == [
        ("topic.bertopic", first.of[d.sample_id]) for d in first.decisions
    ]
    assert "n_neighbors 15, n_components 5, min_cluster_size 3, umap_random_state 13" in first.note
    from mmcurate.benchmarks.deflectionbench import DeflectionBenchConfig

    section = DeflectionBenchConfig(sources=[{"name": "webqa", "root": "."}], gating={"pool": ["m"]})
    row = next(r for r in readings_table(section, {}, "built-in", first) if r["setting"] == "topics")
    assert row["value"] == "bertopic" and row["reading"].startswith(
        "topics.reading bertopic: BERTopic over 30 questions"
    )


def test_a_pool_below_the_minimum_reads_the_source_fields_and_says_so(pool):
    small = pool.slice(0, 12)
    topics = assign_topics(small, TopicsConfig(), 13)
    assert topics.reading == "source_fields" and set(topics.of.values()) == {"webqa/bird", "webqa/rocket"}
    assert "12 questions are fewer than topics.min_samples (20)" in topics.note


def test_sizes_adapt_to_small_pools():
    cfg = TopicsConfig()
    assert adapted(26, cfg) == {"n_neighbors": 15, "n_components": 5, "min_cluster_size": 2}
    assert adapted(80, cfg) == {"n_neighbors": 15, "n_components": 5, "min_cluster_size": 8}
    assert adapted(10_000, cfg) == {"n_neighbors": 15, "n_components": 5, "min_cluster_size": 10}
    assert adapted(6, TopicsConfig(min_samples=5)) == {"n_neighbors": 5, "n_components": 4, "min_cluster_size": 2}
