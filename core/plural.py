"""How cards, reports and changelogs write a count: "1 sample", "2 samples", never "sample(s)"."""
from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None, grouped: bool = False) -> str:
    """``n`` and ``noun`` in agreement; ``plural`` when it is not ``noun + "s"`` ("query", "queries");
    ``grouped``: thousands separated ("12,000 samples")."""
    number = f"{n:,}" if grouped else str(n)
    return f"{number} {noun if n == 1 else plural or noun + 's'}"
