"""PNG plots for the dataset card and the report (matplotlib, Agg backend, no display)."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Literal

import matplotlib
import pyarrow as pa
import pyarrow.compute as pc

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.container import BarContainer  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

# counts of samples are whole numbers: every count axis uses MaxNLocator(integer=True)


def value_counts(column: pa.ChunkedArray | pa.Array) -> Counter:
    """How often each value occurs in an Arrow column (the data of a distribution bar chart)."""
    return Counter({row["values"]: row["counts"] for row in pc.value_counts(column).to_pylist()})


def sorted_counts(counts: Counter) -> dict[str, int]:
    """Counts keyed by their value as text, in the value's order (numbers in numeric order)."""
    return {str(key): counts[key] for key in sorted(counts)}


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG bytes (closed afterwards)."""
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def _label_counts(
    ax: Axes, bars: BarContainer, count_axis: Literal["x", "y"], xlabel: str, ylabel: str, title: str, padding: int = 2
) -> None:
    """Each bar's count written beside it, whole-number ticks on the count axis, the labels and title."""
    ax.bar_label(bars, padding=padding)
    (ax.xaxis if count_axis == "x" else ax.yaxis).set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)


def funnel_figure(funnel: list[dict]) -> Figure:
    """Samples remaining after each stage, first stage on top."""
    stages = [str(r["stage"]) for r in funnel]
    remaining = [int(r["remaining"]) for r in funnel]
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(stages) + 1.5))
    bars = ax.barh(stages[::-1], remaining[::-1], color="#4C72B0")
    _label_counts(ax, bars, "x", "samples remaining", "stage", "Curation funnel", padding=3)
    return fig


def convergence_figure(convergence: list[dict]) -> Figure:
    """Samples retained as gating models are added (the paper's Figure 5): one bar per number
    of models, from zero, so a single model reads as what it kept, not a dot on a narrow axis."""
    rows = sorted(convergence, key=lambda r: int(r["n_models"]))
    labels = [f"{int(r['n_models'])}: +{r.get('model', '')}" for r in rows]
    retained = [int(r["retained"]) for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4))
    bars = ax.bar(labels, retained, color="#C44E52")
    if len(rows) > 1:
        ax.plot(labels, retained, color="#444444", marker="o", linewidth=1)
    ax.set_ylim(0, max(retained + [1]) * 1.15)
    _label_counts(
        ax,
        bars,
        "y",
        "gating models applied (and the one added)",
        "samples retained",
        "Convergence of parametric gating",
    )
    return fig


def topics_figure(topics: list[dict]) -> Figure:
    """Share of samples per topic before and after curation (the paper's Figure 4, overlaid)."""
    names = [str(r["topic"]) for r in topics][::-1]
    before = [float(r["before_pct"]) for r in topics][::-1]
    after = [float(r["after_pct"]) for r in topics][::-1]
    ys = range(len(names))
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(names) + 1.8))
    ax.barh([y + 0.2 for y in ys], before, height=0.4, color="#8C8C8C", label="before curation")
    ax.barh([y - 0.2 for y in ys], after, height=0.4, color="#4C72B0", label="after curation")
    ax.set_yticks(list(ys), names, fontsize=8)
    ax.set_xlabel("share of samples (%)")
    ax.set_ylabel("topic")
    ax.set_title("Topic distribution before and after curation")
    ax.legend(fontsize="small")
    return fig


def counts_figure(title: str, counts: Mapping[str, int], xlabel: str, ylabel: str) -> Figure:
    keys = list(counts)
    fig, ax = plt.subplots(figsize=(7, 4))
    bars = ax.bar([str(k) for k in keys], [int(counts[k]) for k in keys], color="#55A868")
    _label_counts(ax, bars, "y", xlabel, ylabel, title)
    ax.tick_params(axis="x", labelrotation=30)
    return fig


def retention_figure(per_source: Mapping[str, tuple[int, int]]) -> Figure:
    """Per source: samples that entered and samples released, with the share kept."""
    names = list(per_source)[::-1]
    entered = [per_source[n][0] for n in names]
    kept = [per_source[n][1] for n in names]
    ys = range(len(names))
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(names) + 1.6))
    ax.barh(list(ys), entered, color="#C8C8C8", label="entered")
    bars = ax.barh(list(ys), kept, color="#4C72B0", label="released")
    ax.bar_label(
        bars,
        labels=[f"{k} of {e} ({100 * k / e:.0f}%)" if e else "0" for k, e in zip(kept, entered)],
        padding=3,
        fontsize=8,
    )
    ax.set_yticks(list(ys), names)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("samples")
    ax.set_title("Retention per source")
    ax.legend(fontsize="small", loc="lower right")
    return fig


def reasons_figure(title: str, counts: Mapping[str, int]) -> Figure:
    """Records (or samples) per reason, most frequent on top; long reasons cut to one line."""
    names = [r if len(r) <= 60 else r[:57] + "..." for r in counts][::-1]
    values = [int(v) for v in counts.values()][::-1]
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(names) + 1.6))
    bars = ax.barh(names, values, color="#DD8452")
    ax.bar_label(bars, padding=3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.tick_params(axis="y", labelsize=8)
    ax.set_xlabel("count")
    ax.set_title(title)
    return fig


def saturation_figure(points: Sequence[tuple[str, datetime | str, float, str]]) -> Figure:
    """The saturation curve: per gating model (one line each), the share of the benchmark it
    answers parametrically at each version that asked it. ``points``: (model, when, share,
    version) with ``when`` a datetime (a version's creation) or the version text."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for model in dict.fromkeys(p[0] for p in points):
        mine = [p for p in points if p[0] == model]
        dates = [p[1] for p in mine]  # dates or version names: matplotlib's stubs take numbers
        ax.plot(dates, [100 * p[2] for p in mine], marker="o", label=model)  # type: ignore[arg-type]
        for _, when, share, version in mine:
            ax.annotate(version, (when, 100 * share), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_ylim(0, 100)
    ax.set_xlabel("release date")
    ax.set_ylabel("answered without retrieval (%)")
    ax.set_title("Saturation: what each gating model answers from memory")
    ax.legend(fontsize="small")
    fig.autofmt_xdate()
    return fig


def leaderboard_figure(metric: str, rows: list[dict]) -> Figure:
    """One headline metric per evaluation run and condition, with its 95% Wilson interval."""
    shown = [r for r in rows if r[metric] is not None]
    labels = [f"{r['run']}\n{r['condition']}" for r in shown]  # a run's folder: two runs of one model differ
    values = [100 * r[metric] for r in shown]
    low = [100 * (r[metric] - r[f"{metric} low"]) for r in shown]
    high = [100 * (r[f"{metric} high"] - r[metric]) for r in shown]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(shown) + 2), 4))
    ax.bar(labels, values, yerr=[low, high], capsize=4, color="#8172B3")
    ax.set_ylim(0, 100)
    ax.set_ylabel(f"{metric} (%)")
    ax.set_title(f"{metric.capitalize()} with 95% Wilson intervals")
    ax.tick_params(axis="x", labelsize=7)
    return fig


def write_plots(
    statistics: dict[str, list[dict]], distributions: dict[str, tuple[str, str, dict[str, int]]], out: Path
) -> dict[str, str]:
    """Write every plot the data allows into ``out``; return {title: file name}.
    ``distributions``: title -> (x label, y label, counts)."""
    out.mkdir(parents=True, exist_ok=True)
    pngs: dict[str, tuple[str, bytes]] = {}
    if statistics.get("funnel"):
        pngs["Curation funnel"] = ("funnel.png", png_bytes(funnel_figure(statistics["funnel"])))
    if len(statistics.get("convergence") or []) > 1:  # one model: no convergence to draw
        pngs["Convergence of gating"] = ("convergence.png", png_bytes(convergence_figure(statistics["convergence"])))
    if statistics.get("topics"):
        pngs["Topic distribution before and after curation"] = (
            "topics.png",
            png_bytes(topics_figure(statistics["topics"])),
        )
    for i, (title, (xlabel, ylabel, counts)) in enumerate(distributions.items()):
        if counts:
            figure = counts_figure(title.capitalize(), counts, xlabel, ylabel)
            pngs[title.capitalize()] = (f"distribution-{i}.png", png_bytes(figure))
    for name, data in pngs.values():
        (out / name).write_bytes(data)
    return {title: name for title, (name, _) in pngs.items()}
