"""Plots read as counts: whole numbers on every count axis, every axis labelled, and a
convergence plot that says something with one gating model."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from mmcurate.releases.plots import convergence_figure, counts_figure, funnel_figure


def _ticks_are_whole(values) -> bool:
    return all(float(v).is_integer() for v in values)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_funnel_counts_are_whole_and_labelled():
    ax = funnel_figure([{"stage": "ingested", "remaining": 3}, {"stage": "I parametric gating", "remaining": 2}]).axes[
        0
    ]
    assert _ticks_are_whole(ax.get_xticks())  # not 0.5, 1.0, 1.5 ... for three samples
    assert ax.get_xlabel() == "samples remaining" and ax.get_ylabel() == "stage"


def test_convergence_with_one_model_is_a_bar_from_zero():
    ax = convergence_figure([{"n_models": 1, "model": "smollm2", "retained": 72}]).axes[0]
    assert len(ax.patches) == 1 and ax.patches[0].get_height() == 72
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] > 72  # not a dot on a 69-75 axis
    assert _ticks_are_whole(ax.get_yticks())
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1: +smollm2"]
    assert ax.get_xlabel() and ax.get_ylabel() == "samples retained"


def test_distribution_counts_are_whole_and_labelled():
    ax = counts_figure("Samples per source", {"infoseek": 2, "webqa": 1}, "source", "samples").axes[0]
    assert _ticks_are_whole(ax.get_yticks())
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("source", "samples")
