"""PNG plots for the dataset card and the report (matplotlib, Agg backend, no display)."""
from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def funnel_png(funnel: list[dict]) -> bytes:
    """Samples remaining after each stage, first stage on top."""
    stages = [str(r["stage"]) for r in funnel]
    remaining = [int(r["remaining"]) for r in funnel]
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(stages) + 1.5))
    bars = ax.barh(stages[::-1], remaining[::-1], color="#4C72B0")
    ax.bar_label(bars, padding=3)
    ax.set_xlabel("samples remaining")
    ax.set_title("Curation funnel")
    return _png(fig)


def convergence_png(convergence: list[dict]) -> bytes:
    """Retained samples as gating models are added (the paper's Figure 5)."""
    rows = sorted(convergence, key=lambda r: int(r["n_models"]))
    xs = [int(r["n_models"]) for r in rows]
    ys = [int(r["retained"]) for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(xs, ys, marker="o", color="#C44E52")
    for x, y, r in zip(xs, ys, rows):
        ax.annotate(str(r.get("model", "")), (x, y), textcoords="offset points", xytext=(4, 6), fontsize=8)
    ax.set_xticks(xs)
    ax.set_xlabel("gating models applied")
    ax.set_ylabel("samples retained")
    ax.set_title("Convergence of parametric gating")
    return _png(fig)


def topics_png(topics: list[dict]) -> bytes:
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
    ax.set_title("Topic distribution before and after curation")
    ax.legend(fontsize="small")
    return _png(fig)


def counts_png(title: str, counts: Mapping[str, int]) -> bytes:
    keys = list(counts)
    fig, ax = plt.subplots(figsize=(7, 4))
    bars = ax.bar([str(k) for k in keys], [counts[k] for k in keys], color="#55A868")
    ax.bar_label(bars, padding=2)
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=30)
    return _png(fig)


def write_plots(statistics: dict[str, list[dict]], distributions: dict[str, dict[str, int]], out: Path) -> dict[str, str]:
    """Write every plot the data allows into ``out``; return {title: file name}."""
    out.mkdir(parents=True, exist_ok=True)
    pngs: dict[str, tuple[str, bytes]] = {}
    if statistics.get("funnel"):
        pngs["Curation funnel"] = ("funnel.png", funnel_png(statistics["funnel"]))
    if statistics.get("convergence"):
        pngs["Convergence of gating"] = ("convergence.png", convergence_png(statistics["convergence"]))
    if statistics.get("topics"):
        pngs["Topic distribution before and after curation"] = ("topics.png", topics_png(statistics["topics"]))
    for i, (title, counts) in enumerate(distributions.items()):
        if counts:
            pngs[title.capitalize()] = (f"distribution-{i}.png", counts_png(title.capitalize(), counts))
    for name, data in pngs.values():
        (out / name).write_bytes(data)
    return {title: name for title, (name, _) in pngs.items()}
