"""Evaluation figures as PNG files drawn on matplotlib's Agg canvas: no pyplot, no display,
whatever pyplot's backend is."""

from __future__ import annotations

from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def new_axes(width: float, height: float) -> tuple[Figure, Axes]:
    """A figure of ``width`` x ``height`` inches on the Agg canvas, with one set of axes."""
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def save_png(fig: Figure, path: Path | str) -> Path:
    """``fig`` laid out and written to ``path`` (folders made) as a 120 dpi PNG."""
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=120)
    return path
