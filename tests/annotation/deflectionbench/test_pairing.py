"""Stage II: negatives from the source when it has them, else mined; deduplicated, capped."""

from __future__ import annotations

import pytest

from mmcurate.annotation.deflectionbench.mining import MinedText
from mmcurate.annotation.deflectionbench.pairing import pair_knowledge
from mmcurate.core.schema import SAMPLE


def negs(table):
    return {r["source_id"]: [c["context_id"] for c in r["negative_contexts"]] for r in table.to_pylist()}


def test_source_negatives_win_over_mined(make):
    s = make.sample(
        "w", "Q?", ["A"], source="webqa", negatives=[make.text("n1", "neg one"), make.text("n2", "neg two")]
    )
    mined = MinedText({s["sample_id"]: [make.text("m1", "mined one")]})
    result = pair_knowledge(make.table([s]), mined, {}, "r")
    assert negs(result.kept) == {"w": ["n1", "n2"]}
    [d] = result.decisions
    assert (d.stage, d.check, d.verdict) == ("pairing", "negatives.source", "paired")
    assert d.detail["count"] == 2 and d.detail["context_ids"] == ["n1", "n2"]
    assert not hasattr(result, "convergence") and result.kept.schema == SAMPLE  # early elimination is Stages I and III


def test_mined_are_interleaved_deduplicated_and_never_gold(make):
    gold = [make.text("g", "The gold passage."), make.image("gi", "cd" * 32)]
    s = make.sample("i", "Q?", ["A"], gold=gold)
    sid = s["sample_id"]
    mined_text = MinedText(
        {
            sid: [
                make.text("t1", "first passage"),
                make.text("g", "other text but the gold id"),  # gold id
                make.text("t2", "  THE gold   passage. "),  # gold content (normalised)
                make.text("t3", "First   Passage"),  # duplicate content of t1
                make.text("t1", "again t1 id"),  # duplicate id
                make.text("t4", "fourth passage"),
            ]
        },
        {sid: {"candidates": 9, "gold": 1, "answer": 0, "overlap": 0}},
    )
    mined_images = {sid: [make.image("i1", "11" * 32), make.image("i2", "cd" * 32), make.image("i3", "33" * 32)]}
    result = pair_knowledge(make.table([s]), mined_text, mined_images, "r", leakage_filter="none")
    # interleaved text/image: t1, i1, g(x), i2(x gold image), t2(x), i3, t3(x), t1(x), t4
    assert negs(result.kept) == {"i": ["t1", "i1", "i3", "t4"]}
    [d] = result.decisions
    assert d.check == "negatives.mined" and d.detail["modalities"] == {"text": 2, "image": 2}
    assert d.detail["removed"] == {"equals_gold": ["g", "i2", "t2"], "duplicate": ["t3", "t1"]}
    assert d.detail["offered"] == {"text": 6, "image": 3}
    # what the miner removed before reranking, by rule, under the leakage filter it used
    assert d.detail["mining"] == {
        "leakage_filter": "none",
        "candidates": 9,
        "removed": {"gold": 1, "answer": 0, "overlap": 0},
    }
    assert result.counts == {
        "mined_candidates": 9,
        "mined_removed_gold": 1,
        "mined_removed_answer": 0,
        "mined_removed_overlap": 0,
    }


def test_cap_and_empty(make):
    a = make.sample("a", "Q?", ["A"])
    b = make.sample("b", "Q?", ["A"])
    mined = MinedText({a["sample_id"]: [make.text(f"t{i}", f"passage {i}") for i in range(5)]})
    result = pair_knowledge(make.table([a, b]), mined, {}, "r", max_negatives=3)
    assert negs(result.kept) == {"a": ["t0", "t1", "t2"], "b": []}
    by = {d.sample_id: d for d in result.decisions}
    assert by[a["sample_id"]].detail["removed"] == {"over_cap": ["t3", "t4"]}
    assert by[b["sample_id"]].verdict == "empty"
    assert result.kept.num_rows == 2  # pairing never drops: k_min in Stage III does
    with pytest.raises(ValueError):
        pair_knowledge(make.table([a]), MinedText(), {}, "r", max_negatives=0)
