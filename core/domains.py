"""The four task domains ReflectV groups its image QA sources into (MIRROR, appendix A.1).

A source adapter tags every sample with one of them in ``meta["domain"]``; the keyword
stage reads it (entities from the feedback for General QA, a subject phrase from the
question and ground truth for the dense-perception domains) and releases count by it.
"""

from __future__ import annotations

import json
from typing import Literal

GENERAL_QA = "General QA"
SCENE_TEXT = "Scene text"
DOCUMENT = "Document"
CHART = "Chart"
DOMAINS = (GENERAL_QA, SCENE_TEXT, DOCUMENT, CHART)
DENSE_PERCEPTION = frozenset({SCENE_TEXT, DOCUMENT, CHART})  # reflection lacks spatial specificity there

Domain = Literal["General QA", "Scene text", "Document", "Chart"]


def domain_of(meta_json: str | None) -> str:
    """The domain tagged in a sample's meta JSON; ValueError when it is missing or unknown."""
    try:
        meta = json.loads(meta_json or "{}")
    except json.JSONDecodeError:
        meta = {}
    domain = meta.get("domain") if isinstance(meta, dict) else None
    if domain not in DOMAINS:
        raise ValueError(f"meta.domain is {domain!r}; expected one of {list(DOMAINS)}")
    return str(domain)
