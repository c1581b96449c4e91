"""One maximum negative count (issue 43 item 5): the negatives Stage II keeps per sample, the
negatives the plan assumes it offers and the negatives an evaluation may show are bounded by
``benchmarks.deflectionbench.MAX_NEGATIVES`` alone, 20: MRAG-Bench's top-20 retrieval (seed 003,
L1415), above Table 3's 11.8 negatives per sample on average."""

from __future__ import annotations

import pytest

from mmcurate.annotation.deflectionbench.mining import MinedText
from mmcurate.annotation.deflectionbench.pairing import PairKnowledge, pair_knowledge
from mmcurate.benchmarks.deflectionbench import (
    MAX_NEGATIVES,
    DeflectionBenchConfig,
    DeflectionEvalConfig,
    RetrievalConfig,
)
from mmcurate.evaluation.deflectionbench.scenarios import scenario_contexts
from mmcurate.evaluation.failures import EvaluationError
from mmcurate.planning.deflectionbench.curation import offered_negatives


def test_pairing_plan_and_evaluation_share_one_maximum(make):
    assert MAX_NEGATIVES == 20
    sample = make.sample("m", "Which object?", ["x"], source="mragbench")
    mined = MinedText({sample["sample_id"]: [make.text(f"t{i}", f"passage {i}") for i in range(MAX_NEGATIVES + 5)]})
    [row] = pair_knowledge(make.table([sample]), mined, {}, "r").kept.to_pylist()
    assert len(row["negative_contexts"]) == MAX_NEGATIVES == PairKnowledge(RetrievalConfig()).max_negatives
    section = DeflectionBenchConfig(
        sources=[{"name": "mragbench", "root": "."}],
        gating={"pool": ["m"]},
        mining={"mragbench": {"strategy": "image_to_image", "top_k": 50}},
    )
    assert offered_negatives(section) == MAX_NEGATIVES
    # every negative a sample keeps can be shown; one more cannot be asked for
    shown = scenario_contexts(row, "adversarial", MAX_NEGATIVES)
    assert len(shown) == MAX_NEGATIVES
    with pytest.raises(EvaluationError, match=f"1..{MAX_NEGATIVES}, got {MAX_NEGATIVES + 1}"):
        scenario_contexts(row, "adversarial", MAX_NEGATIVES + 1)
    assert DeflectionEvalConfig(table_negatives=MAX_NEGATIVES).table_negatives == MAX_NEGATIVES
