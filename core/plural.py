"""How cards, reports, changelogs and errors write a count ("1 sample", "2 samples", never
"sample(s)") and a list that may be long ("a, b, c and 9,990 more")."""

from __future__ import annotations

from collections.abc import Iterable

SHOWN = 10  # items a list names before "and N more"


def counted(n: int, noun: str, plural: str | None = None, grouped: bool = False) -> str:
    """``n`` and ``noun`` in agreement; ``plural`` when it is not ``noun + "s"`` ("query", "queries");
    ``grouped``: thousands separated ("12,000 samples")."""
    number = f"{n:,}" if grouped else str(n)
    return f"{number} {noun if n == 1 else plural or noun + 's'}"


def listed(items: Iterable[object], shown: int = SHOWN, sep: str = ", ") -> str:
    """The first ``shown`` items joined by ``sep``, then "and N more" for the rest: an error
    line stays one readable line however long the list is."""
    texts = [str(i) for i in items]
    if len(texts) <= shown:
        return sep.join(texts)
    return f"{sep.join(texts[:shown])} and {len(texts) - shown:,} more"
