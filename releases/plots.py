"""PNG plots for the dataset card and the report (matplotlib, Agg backend, no display)."""
from __future__ import annotations

import io
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import matplotlib
import pyarrow as pa
import pyarrow.compute as pc

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

# counts of samples are whole numbers: every count axis uses MaxNLocator(integer=True)



def value_counts(column: pa.ChunkedArray | pa.Array) -> Counter:
    """How often each value occurs in an Arrow column (the data of a distribution bar chart)."""
    return Counter({row["values"]: row["counts"] for row in pc.value_counts(column).to_pylist()})


def sorted_counts(counts: Counter) -> dict[str, int]:
    """Counts keyed by their value as text, in the value's order (numbers in numeric order)."""
    return {str(key): counts[key] for key in sorted(counts)}

def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def funnel_figure(funnel: list[dict]) -> Figure:
    """Samples remaining after each stage, first stage on top."""
    stages = [str(r["stage"]) for r in funnel]
    remaining = [int(r["remaining"]) for r in funnel]
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(stages) + 1.5))
    bars = ax.barh(stages[::-1], remaining[::-1], color="#4C72B0")
    ax.bar_label(bars, padding=3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("samples remaining")
    ax.set_ylabel("stage")
    ax.set_title("Curation funnel")
    return fig


def convergence_figure(convergence: list[dict]) -> Figure:
    """Samples retained as gating models are added (the paper's Figure 5): one bar per number
    of models, from zero, so a single model reads as what it kept, not a dot on a narrow axis."""
    rows = sorted(convergence, key=lambda r: int(r["n_models"]))
    labels = [f"{int(r['n_models'])}: +{r.get('model', '')}" for r in rows]
    retained = [int(r["retained"]) for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4))
    bars = ax.bar(labels, retained, color="#C44E52")
    ax.bar_label(bars, padding=2)
    if len(rows) > 1:
        ax.plot(labels, retained, color="#444444", marker="o", linewidth=1)
    ax.set_ylim(0, max(retained + [1]) * 1.15)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("gating models applied (and the one added)")
    ax.set_ylabel("samples retained")
    ax.set_title("Convergence of parametric gating")
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
    ax.bar_label(bars, padding=2)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=30)
    return fig


def write_plots(statistics: dict[str, list[dict]], distributions: dict[str, tuple[str, str, dict[str, int]]],
                out: Path) -> dict[str, str]:
    """Write every plot the data allows into ``out``; return {title: file name}.
    ``distributions``: title -> (x label, y label, counts)."""
    out.mkdir(parents=True, exist_ok=True)
    pngs: dict[str, tuple[str, bytes]] = {}
    if statistics.get("funnel"):
        pngs["Curation funnel"] = ("funnel.png", _png(funnel_figure(statistics["funnel"])))
    if statistics.get("convergence"):
        pngs["Convergence of gating"] = ("convergence.png", _png(convergence_figure(statistics["convergence"])))
    if statistics.get("topics"):
        pngs["Topic distribution before and after curation"] = ("topics.png", _png(topics_figure(statistics["topics"])))
    for i, (title, (xlabel, ylabel, counts)) in enumerate(distributions.items()):
        if counts:
            figure = counts_figure(title.capitalize(), counts, xlabel, ylabel)
            pngs[title.capitalize()] = (f"distribution-{i}.png", _png(figure))
    for name, data in pngs.values():
        (out / name).write_bytes(data)
    return {title: name for title, (name, _) in pngs.items()}
