"""The streamed curation's settings (issue 36 item 2), range-checked at load with one line
naming the field: ``deflectionbench.shard_size`` and ``deflectionbench.topics.fit_sample``;
the shard size is how a run is cut, not what it decides, so it is no part of a release's identity."""

from __future__ import annotations

import pytest

from mmcurate.annotation.deflectionbench.pairing import PairKnowledge
from mmcurate.benchmarks.deflectionbench import RetrievalConfig
from mmcurate.core.errors import ConfigError
from mmcurate.releases.rerun import identity
from tests.core.test_config_ranges import BASE, load_text


def _load(tmp_path, extra: str):
    return load_text(tmp_path, BASE + extra)


@pytest.mark.parametrize(
    "extra, field",
    [
        ("  shard_size: 0\n", "deflectionbench.shard_size"),
        ("  shard_size: 1000001\n", "deflectionbench.shard_size"),
        ("  topics: {fit_sample: 99}\n", "deflectionbench.topics.fit_sample"),
        ("  topics: {fit_sample: 1000001}\n", "deflectionbench.topics.fit_sample"),
    ],
)
def test_out_of_range_is_refused_in_one_line(tmp_path, extra: str, field: str):
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, extra)
    assert field in str(err.value) and "\n" not in str(err.value)


def test_defaults_follow_the_paper_and_the_shard_size_is_not_identity(tmp_path):
    settings = _load(tmp_path, "  shard_size: 7\n")
    section = settings.deflectionbench
    assert section.shard_size == 7 and section.topics.fit_sample is None  # the paper clusters the whole pool
    resolved = settings.resolved()
    other = {**resolved, "deflectionbench": {**resolved["deflectionbench"], "shard_size": 10_000}}
    assert identity("deflectionbench", resolved, []) == identity("deflectionbench", other, [])
    fitted = {**resolved, "deflectionbench": {**resolved["deflectionbench"], "topics": {"fit_sample": 500}}}
    assert identity("deflectionbench", resolved, []) != identity("deflectionbench", fitted, [])


def test_stage_ii_needs_the_whole_pool_only_where_a_source_mines_its_own_images():
    assert not PairKnowledge(RetrievalConfig(), sources=("webqa", "mmdocrag", "infoseek")).pool_wide
    assert PairKnowledge(RetrievalConfig(), sources=("webqa", "mragbench")).pool_wide  # image_to_image (eq. 3)
    assert PairKnowledge(RetrievalConfig()).pool_wide  # sources unknown: the safe reading
