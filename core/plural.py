"""How cards, reports and changelogs write a count: "1 sample", "2 samples", never "sample(s)"."""
from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun`` in agreement; ``plural`` when it is not ``noun + "s"`` ("query", "queries")."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
