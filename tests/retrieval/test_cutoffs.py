"""CRUISE's MAD dynamic cutoff and the fixed top-K, on the worked examples of METHODS.md."""

from __future__ import annotations

import pytest

from mmcurate.core.errors import ConfigError, MmcurateError
from mmcurate.core.specs import CutoffSpec, MadCutoff, TopK, coerce
from mmcurate.retrieval.cutoffs import apply_cutoff, mad_threshold, unit_scores

EXAMPLE = [0.95, 0.9, 0.4, 0.3, 0.2, 0.1, 0.05, 0.04, 0.03, 0.02]


def ranked(scores):
    return [(f"d{i}", s) for i, s in enumerate(scores)]


def test_worked_example_keeps_the_three_best():
    theta, median, mad = mad_threshold(EXAMPLE, 0.1, 1.5)
    assert median == pytest.approx(0.15) and mad == pytest.approx(0.125)
    assert theta == 0.1  # median - 1.5 * MAD = -0.0375 < tau
    cut = apply_cutoff(ranked(EXAMPLE), "mad")
    assert [item for item, _ in cut.kept] == ["d0", "d1", "d2"]
    assert len(cut.cut) == 7
    assert cut.detail["cutoff"] == "mad" and cut.detail["kept"] == 3 and cut.detail["cut"] == 7
    assert cut.detail["retrieved"] == 10 and cut.detail["theta"] == 0.1


def test_everything_below_tau_keeps_nothing():
    cut = apply_cutoff(ranked([0.09, 0.08, 0.05, 0.01]), "mad")
    assert cut.kept == [] and len(cut.cut) == 4


def test_mad_threshold_above_tau_and_max_keep():
    # median .725, MAD .15 -> theta = .725 - .225 = .5: six pass, at most 3 kept
    scores = [0.9, 0.85, 0.8, 0.8, 0.75, 0.7, 0.3, 0.2, 0.1, 0.05]
    theta, median, mad = mad_threshold(scores, 0.1, 1.5)
    assert (median, mad) == pytest.approx((0.725, 0.15)) and theta == pytest.approx(0.5)
    cut = apply_cutoff(ranked(scores), "mad")
    assert [i for i, _ in cut.kept] == ["d0", "d1", "d2"]
    wider = apply_cutoff(ranked(scores), "mad:0.1:1.5:10")
    assert [i for i, _ in wider.kept] == ["d0", "d1", "d2", "d3", "d4", "d5"]
    assert [i for i, _ in wider.cut] == ["d6", "d7", "d8", "d9"]


def test_statistics_use_the_top_ten_only():
    # twenty scores: the ten zeros after the top ten do not lower the median
    scores = [0.9, 0.85, 0.8, 0.8, 0.75, 0.7, 0.7, 0.65, 0.6, 0.6] + [0.0] * 10
    theta, median, _ = mad_threshold(scores, 0.1, 1.5)
    assert median == pytest.approx(0.725) and theta > 0.5


def test_ties_keep_retrieval_order_and_unsorted_input_is_ranked():
    cut = apply_cutoff([("a", 0.5), ("b", 0.5), ("c", 0.5), ("d", 0.5)], "mad")
    assert [i for i, _ in cut.kept] == ["a", "b", "c"]  # all equal: MAD 0, theta .5, first three
    assert cut.detail["mad"] == 0 and cut.detail["theta"] == 0.5
    shuffled = apply_cutoff([("low", 0.2), ("top", 0.95), ("mid", 0.9)], "mad:0.1:1.5:2")
    assert [i for i, _ in shuffled.kept] == ["top", "mid"]


def test_empty_and_single_lists():
    empty = apply_cutoff([], "mad")
    assert empty.kept == [] and empty.cut == [] and empty.detail["theta"] is None
    assert apply_cutoff([], "top_k:3").kept == []
    assert [i for i, _ in apply_cutoff([("only", 0.4)], "mad").kept] == ["only"]
    assert apply_cutoff([("only", 0.05)], "mad").kept == []


def test_top_k():
    cut = apply_cutoff(ranked(EXAMPLE), "top_k:5")
    assert [i for i, _ in cut.kept] == ["d0", "d1", "d2", "d3", "d4"] and len(cut.cut) == 5
    assert cut.detail == {"cutoff": "top_k:5", "scale": "unit", "retrieved": 10, "kept": 5, "cut": 5}


def test_score_scales():
    assert unit_scores([-0.3, 0.2, 1.0], "cosine") == [0.0, 0.2, 1.0]
    assert unit_scores([0.0, 2.0, -800.0], "logit") == pytest.approx([0.5, 0.8808, 0.0], abs=1e-4)
    with pytest.raises(MmcurateError, match="must be in \\[0, 1\\]"):
        apply_cutoff([("a", 1.7)], "mad")
    cut = apply_cutoff([("a", 0.55), ("b", -0.2), ("c", 0.5)], "mad", scale="cosine")
    assert [i for i, _ in cut.kept] == ["a", "c"]  # theta = max(.1, .5 - 1.5 * .05)


def test_spec_forms_round_trip():
    assert coerce(CutoffSpec, "mad") == MadCutoff()
    assert coerce(CutoffSpec, {"kind": "mad", "tau": 0.1, "lambda": 1.5, "max_keep": 3}) == MadCutoff()
    custom = coerce(CutoffSpec, {"kind": "mad", "tau": 0.2, "lambda": 1, "max_keep": 2})
    assert str(custom) == "mad:0.2:1:2" and coerce(CutoffSpec, str(custom)) == custom
    assert coerce(CutoffSpec, "top_k:5") == TopK(k=5) and str(TopK(k=5)) == "top_k:5"
    for bad, message in [
        ("mad:1", "mad:<tau>"),
        ("top_k:0", "greater than or equal to 1"),
        ("median", "unknown spec"),
        ("mad:2:1:1", "less than or equal to 1"),
    ]:
        with pytest.raises(ConfigError, match=message):
            coerce(CutoffSpec, bad)


def test_retrieval_score_is_the_best_unit_score_kept_or_cut():
    from mmcurate.retrieval.cutoffs import retrieval_score

    cut = apply_cutoff([("a", 0.3), ("b", 0.95), ("c", 0.05)], "mad")
    assert retrieval_score(cut) == 0.95
    none_kept = apply_cutoff([("a", 0.08), ("b", 0.02)], "mad")  # all below tau 0.1: nothing kept
    assert none_kept.kept == [] and retrieval_score(none_kept) == 0.08
    assert retrieval_score(apply_cutoff([("a", 2.0)], "mad", scale="logit")) == pytest.approx(0.8808, abs=1e-4)
    assert retrieval_score(apply_cutoff([], "mad")) == 0.0
