"""Topics of questions by BERTopic (seed 003, appendix C): question embeddings reduced with
UMAP, clustered with HDBSCAN, each cluster named by its c-TF-IDF keywords.

The embeddings are computed by the configured text encoder (MiniLM offline; the paper uses
OpenAI text-embedding-3-large) and handed to BERTopic precomputed, so no model is loaded
here. UMAP is seeded (``random_state``; one thread), so the same questions give the same
topics on every run. The paper names each cluster with GPT-4o from ten representative
questions; here a topic is BERTopic's own name, its id and top keywords (``3_bird_species_nest``),
English stop words left out of the keywords.

Sizes for small pools (``adapted``): BERTopic's defaults (UMAP ``n_neighbors`` 15,
``n_components`` 5; HDBSCAN ``min_cluster_size`` 10) are for thousands of documents. For
``n`` questions, ``n_neighbors`` is at most n - 1, ``n_components`` at most n - 2 (UMAP's
spectral layout needs fewer dimensions than points), and ``min_cluster_size`` at most
max(2, n // 10), so a pool of a few dozen questions still forms several clusters; at 100
questions and more the configured values hold unchanged.

``fitted_topics`` (``topics.fit_sample``): the model is fitted on a subsample only, with the sizes
for the subsample, and every other question is embedded and assigned ``ASSIGN_BATCH`` at a time
by BERTopic's ``transform`` (UMAP's transform, HDBSCAN's approximate prediction and, with
``outliers: probabilities``, its membership vectors), so the pool is never embedded at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mmcurate.benchmarks.deflectionbench import TopicsConfig
from mmcurate.core.errors import MmcurateError


def adapted(n: int, cfg: TopicsConfig) -> dict[str, int]:
    """UMAP and HDBSCAN sizes for ``n`` questions (module docstring)."""
    return {
        "n_neighbors": min(cfg.n_neighbors, n - 1),
        "n_components": min(cfg.n_components, n - 2),
        "min_cluster_size": min(cfg.min_cluster_size, max(2, n // 10)),
    }


ASSIGN_BATCH = 8192  # questions embedded and assigned at a time after a fit on a subsample


def _model(n: int, cfg: TopicsConfig, seed: int) -> tuple[Any, dict[str, int]]:
    """An unfitted BERTopic for ``n`` questions, and the sizes it uses."""
    try:
        from bertopic import BERTopic
        from hdbscan import HDBSCAN
        from sklearn.feature_extraction.text import CountVectorizer
        from umap import UMAP
    except ImportError as exc:
        raise MmcurateError(
            f"topics: bertopic needs the packages bertopic, umap-learn and hdbscan ({exc.name} is "
            "missing; run `make setup`), or set deflectionbench.topics.reading: source_fields"
        ) from None
    sizes = adapted(n, cfg)
    umap = UMAP(
        n_neighbors=sizes["n_neighbors"],
        n_components=sizes["n_components"],
        min_dist=0.0,
        metric="cosine",
        random_state=seed,
    )
    hdbscan = HDBSCAN(
        min_cluster_size=sizes["min_cluster_size"],
        metric="euclidean",
        cluster_selection_method="eom",
        prediction_data=True,
    )
    model = BERTopic(
        umap_model=umap,
        hdbscan_model=hdbscan,
        vectorizer_model=CountVectorizer(stop_words="english"),
        calculate_probabilities=cfg.outliers == "probabilities",
    )
    return model, sizes


def _names(model: Any, questions: Sequence[str], ids: Any, probabilities: Any, cfg: TopicsConfig) -> list[str]:
    """The topic name of each question, HDBSCAN's outliers given their most probable cluster
    when ``cfg.outliers`` says so."""
    names = dict(zip(model.get_topic_info()["Topic"], model.get_topic_info()["Name"]))
    if cfg.outliers == "probabilities" and -1 in ids and len(names) > 1:
        ids = model.reduce_outliers(list(questions), ids, probabilities=probabilities, strategy="probabilities")
    return [names[int(i)] for i in ids]


def bertopic_topics(
    questions: Sequence[str], embeddings: np.ndarray, cfg: TopicsConfig, seed: int
) -> tuple[list[str], dict[str, Any]]:
    """The topic of each question, and the parameters that made them (for the card)."""
    model, sizes = _model(len(questions), cfg, seed)
    ids, probabilities = model.fit_transform(list(questions), np.asarray(embeddings, dtype=np.float32))
    params = {**sizes, "umap_random_state": seed, "outliers": cfg.outliers}
    return _names(model, questions, ids, probabilities, cfg), params


def fitted_topics(
    questions: Sequence[str],
    encode: Callable[[list[str]], np.ndarray],
    fit: Sequence[int],
    cfg: TopicsConfig,
    seed: int,
) -> tuple[list[str], dict[str, Any]]:
    """The topic of each question from a BERTopic fitted on the questions at positions ``fit``
    (``topics.fit_sample``), the others embedded by ``encode`` and assigned to its clusters
    ``ASSIGN_BATCH`` at a time (BERTopic's ``transform``); and the parameters (for the card)."""
    model, sizes = _model(len(fit), cfg, seed)
    sample = [questions[i] for i in fit]
    ids, probabilities = model.fit_transform(sample, np.asarray(encode(sample), dtype=np.float32))
    topics = dict(zip(fit, _names(model, sample, ids, probabilities, cfg)))
    rest = [i for i in range(len(questions)) if i not in topics]
    for start in range(0, len(rest), ASSIGN_BATCH):
        rows = rest[start : start + ASSIGN_BATCH]
        batch = [questions[i] for i in rows]
        ids, probabilities = model.transform(batch, np.asarray(encode(batch), dtype=np.float32))
        topics.update(zip(rows, _names(model, batch, ids, probabilities, cfg)))
    params = {**sizes, "fit_sample": len(fit), "umap_random_state": seed, "outliers": cfg.outliers}
    return [topics[i] for i in range(len(questions))], params
