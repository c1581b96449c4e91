"""BERTopic fitted on a seeded subsample (``topics.fit_sample``, issue 36 item 2): every question
still gets a topic (the others assigned by BERTopic's transform), two runs agree, the card says
which reading ran; a pool no larger than the subsample is fitted whole, as without the switch."""

from __future__ import annotations

import pytest

from mmcurate.benchmarks.deflectionbench import TopicsConfig
from mmcurate.releases.deflectionbench.topics import assign_topics

SUBJECTS = {
    "bird": ["species", "nest", "diet", "migration", "eggs"],
    "rocket": ["launch", "agency", "fuel", "stages", "payload"],
    "church": ["architect", "style", "spire", "bells", "organ"],
}


@pytest.fixture(scope="module")
def pool():
    from tests.conftest import sample, table

    rows = [
        sample(
            f"{theme}{aspect}{i}",
            f"What is the {aspect} of this {theme}, number {i}?",
            ["x"],
            source="webqa",
            meta={"topic": theme},
        )
        for theme, aspects in SUBJECTS.items()
        for aspect in aspects
        for i in range(10)
    ]
    return table(rows)


def test_a_subsample_fit_assigns_every_question_and_says_so(pool):
    cfg = TopicsConfig(fit_sample=100)
    first, second = assign_topics(pool, cfg, 13), assign_topics(pool, cfg, 13)
    assert pool.num_rows == 150 and first.reading == "bertopic"
    assert set(first.of) == set(pool["sample_id"].to_pylist()) and all(first.of.values())
    assert dict(first.of) == dict(second.of) and sum(first.before.values()) == 150
    assert "BERTopic fitted on a seeded subsample of 100 questions (topics.fit_sample, seed 13" in first.note
    assert "the other 50 of 150 assigned to its clusters by BERTopic's transform" in first.note
    assert first.ledger("r1").num_rows == 150 and first.ledger("r1")["verdict"].to_pylist() == list(first.of.values())


def test_a_pool_within_the_subsample_is_fitted_whole(pool):
    small = pool.slice(0, 30)
    whole, bounded = assign_topics(small, TopicsConfig(), 13), assign_topics(small, TopicsConfig(fit_sample=100), 13)
    assert dict(bounded.of) == dict(whole.of)
    assert "BERTopic over 30 questions (topics.fit_sample 100: all of them)" in bounded.note
