"""Retrieval quality against relevance labels: NDCG@k, Recall@k, Hit@k, and the Hit@K plot.

Relevance is binary: a document is relevant to a question when the release cites it for a
sentence of the question's answer. For one question with relevant set R and ranking
d_1, d_2, ...:

    DCG@k  = sum_{i <= k, d_i in R} 1 / log2(i + 1)
    IDCG@k = sum_{i <= min(|R|, k)} 1 / log2(i + 1)
    NDCG@k = DCG@k / IDCG@k
    Recall@k = |R intersect {d_1..d_k}| / |R|
    Hit@k  = 1 if some d_i with i <= k is in R, else 0

(binary gains, the trec_eval ``ndcg_cut`` convention). NDCG@k and Recall@k are trec_eval's
(``ir_measures``' ``nDCG@k`` and ``R@k`` through pytrec_eval), given the ranking as scores that
fall with the rank, so ties never reorder it; a document ranked twice counts once. Each is
averaged over the questions that have at least one relevant document; the others cannot be
scored and are counted apart.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

import ir_measures
from ir_measures import R, nDCG

from .figures import new_axes, save_png

HIT_KS = tuple(range(1, 11))


def _trec_eval(measure: ir_measures.Measure, ranking: Sequence[str], relevant: Collection[str]) -> float:
    if not relevant:
        raise ValueError(f"{measure} needs at least one relevant document")
    qrels = {"q": {doc: 1 for doc in relevant}}
    ranked = list(dict.fromkeys(ranking))
    run = {"q": {doc: float(len(ranked) - rank) for rank, doc in enumerate(ranked)}}
    return next((m.value for m in ir_measures.iter_calc([measure], qrels, run)), 0.0)  # nothing ranked: 0


def ndcg_at_k(ranking: Sequence[str], relevant: Collection[str], k: int = 10) -> float:
    return _trec_eval(nDCG @ k, ranking, relevant)


def recall_at_k(ranking: Sequence[str], relevant: Collection[str], k: int = 100) -> float:
    return _trec_eval(R @ k, ranking, relevant)


def first_hit(ranking: Sequence[str], relevant: Collection[str]) -> int | None:
    """The 1-based rank of the first relevant document, or None when none is ranked."""
    return next((i for i, doc in enumerate(ranking, 1) if doc in relevant), None)


def hit_at_k(first_hits: Sequence[int | None], ks: Sequence[int] = HIT_KS) -> dict[int, float]:
    """Share of questions whose first relevant document ranks within k, for each k."""
    if not first_hits:
        raise ValueError("Hit@k needs at least one question")
    return {k: sum(1 for h in first_hits if h is not None and h <= k) / len(first_hits) for k in ks}


def plot_hit_at_k(series: dict[str, dict[int, float]], path: Path | str, title: str = "Hit@K") -> Path:
    """Hit@K against K as a PNG, one line per named series (matplotlib's Agg canvas, no display)."""
    fig, ax = new_axes(6.0, 3.8)
    for name, hits in series.items():
        ks = sorted(hits)
        ax.plot(ks, [100 * hits[k] for k in ks], marker="o", label=name)
    ax.set_xticks(sorted({k for hits in series.values() for k in hits}))
    ax.set_xlabel("K (documents kept after reranking)")
    ax.set_ylabel("questions with a cited document in the top K (%)")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize="small")
    return save_png(fig, path)
