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
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mmcurate.benchmarks.deflectionbench import TopicsConfig
from mmcurate.core.errors import MmcurateError


def adapted(n: int, cfg: TopicsConfig) -> dict[str, int]:
    """UMAP and HDBSCAN sizes for ``n`` questions (module docstring)."""
    return {"n_neighbors": min(cfg.n_neighbors, n - 1), "n_components": min(cfg.n_components, n - 2),
            "min_cluster_size": min(cfg.min_cluster_size, max(2, n // 10))}


def bertopic_topics(questions: Sequence[str], embeddings: np.ndarray, cfg: TopicsConfig,
                    seed: int) -> tuple[list[str], dict[str, Any]]:
    """The topic of each question, and the parameters that made them (for the card)."""
    try:
        from bertopic import BERTopic
        from hdbscan import HDBSCAN
        from sklearn.feature_extraction.text import CountVectorizer
        from umap import UMAP
    except ImportError as exc:
        raise MmcurateError(f"topics: bertopic needs the packages bertopic, umap-learn and hdbscan ({exc.name} is "
                            "missing; run `make setup`), or set deflectionbench.topics.reading: source_fields") from None
    sizes = adapted(len(questions), cfg)
    umap = UMAP(n_neighbors=sizes["n_neighbors"], n_components=sizes["n_components"], min_dist=0.0,
                metric="cosine", random_state=seed)
    hdbscan = HDBSCAN(min_cluster_size=sizes["min_cluster_size"], metric="euclidean",
                      cluster_selection_method="eom", prediction_data=True)
    model = BERTopic(umap_model=umap, hdbscan_model=hdbscan, vectorizer_model=CountVectorizer(stop_words="english"),
                     calculate_probabilities=cfg.outliers == "probabilities")
    ids, probabilities = model.fit_transform(list(questions), np.asarray(embeddings, dtype=np.float32))
    names = dict(zip(model.get_topic_info()["Topic"], model.get_topic_info()["Name"]))
    if cfg.outliers == "probabilities" and -1 in ids and len(names) > 1:
        ids = model.reduce_outliers(list(questions), ids, probabilities=probabilities, strategy="probabilities")
    params = {**sizes, "umap_random_state": seed, "outliers": cfg.outliers}
    return [names[int(i)] for i in ids], params
