"""The RAG settings of RefLVQA's evaluation grid (seed 004, section 5.1 and Table 5).

- ``text`` (TextRAG) and ``image`` (ImageRAG): only documents of that modality are searched;
- ``multi`` (MultiRAG): both, in one ranked list (the text and image rankings fused);
- ``two-step`` (Two-step MultiRAG): one answer from the text documents, one from the image
  documents (shown with captions), then one combined answer keeping the citations of both;
- ``image-cot``, ``image-self-refine``, ``image-caption`` (section 6.2, Table 7): ImageRAG's
  documents answered with zero-shot CoT, Self-Refine or error-robust captions
  (``grounding``); asked for by name, not part of the default grid.

Each runs with N model-written search queries (the paper runs N = 1 and, for Two-step,
N = 4); each query retrieves its top K (5) documents, and the N x K documents go to the answer
step in query order: as retrieved, each with its own number (``duplicates: keep``, section 4:
"Given N x K multimodal documents retrieved"; Table 5's N = 4 rows retrieve 14.27 + 5.72 = 20
per question), or a document several queries found once (``duplicates: merge``). Which documents Two-step splits is a
reading (``two_step_documents``): ``shared`` splits MultiRAG's list by modality (Table 5
reports the same documents retrieved for both: 3.48 text and 1.51 image per question for
Qwen2.5VL), ``per_modality`` takes the TextRAG and ImageRAG lists.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from mmcurate.benchmarks import register_part
from mmcurate.core.plural import listed
from mmcurate.retrieval.rag import BOTH, IMAGE, TEXT, Hit

from ..failures import EvaluationError
from .subset import SUBSETS

TEXT_RAG, IMAGE_RAG, MULTI_RAG, TWO_STEP = "text", "image", "multi", "two-step"
IMAGE_COT, IMAGE_SELF_REFINE, IMAGE_CAPTION = "image-cot", "image-self-refine", "image-caption"
GRID = (TEXT_RAG, IMAGE_RAG, MULTI_RAG, TWO_STEP)  # Table 5: the default settings
IMAGE_GROUNDING = (IMAGE_COT, IMAGE_SELF_REFINE, IMAGE_CAPTION)  # Table 7 (section 6.2), on ImageRAG's documents
SETTINGS = GRID + IMAGE_GROUNDING
PAPER_NAMES = {
    TEXT_RAG: "TextRAG",
    IMAGE_RAG: "ImageRAG",
    MULTI_RAG: "MultiRAG",
    TWO_STEP: "Two-step MultiRAG",
    IMAGE_COT: "ImageRAG + CoT",
    IMAGE_SELF_REFINE: "ImageRAG + Self-Refine",
    IMAGE_CAPTION: "ImageRAG + Captioning",
}
QUERY_COUNTS = range(1, 11)  # N; the paper runs 1 and 4
DEFAULT_QUERIES = (1,)  # "If N is not specified, the single retrieval setting (N = 1) is assumed" (Table 5)


def searched(setting: str, two_step_documents: str = "shared") -> list[tuple[str, ...]]:
    """The retrievals a setting reads: one ranked list per tuple of modalities."""
    if setting == TEXT_RAG:
        return [(TEXT,)]
    if setting == IMAGE_RAG or setting in IMAGE_GROUNDING:
        return [(IMAGE,)]
    if setting == TWO_STEP and two_step_documents == "per_modality":
        return [(TEXT,), (IMAGE,)]
    return [BOTH]


def row_name(setting: str, n: int) -> str:
    """The setting as a row of Table 5: ``Two-step MultiRAG (N = 4)``; N = 1 is not written."""
    return PAPER_NAMES[setting] + ("" if n == 1 else f" (N = {n})")


def pooled(per_query: Iterable[Sequence[Hit]], merge: bool = False) -> list[Hit]:
    """The documents of all queries of one question in query order, then rank order: every
    one as retrieved, or with ``merge`` each document once (its first place)."""
    hits = [hit for found in per_query for hit in found]
    if not merge:
        return hits
    seen: dict[str, Hit] = {}
    for hit in hits:
        seen.setdefault(hit.doc_id, hit)
    return list(seen.values())


def split(hits: Sequence[Hit]) -> tuple[list[Hit], list[Hit]]:
    """(text hits, image hits), each in its order in ``hits``."""
    return [h for h in hits if h.modality == TEXT], [h for h in hits if h.modality == IMAGE]


@register_part("reflvqa", "evaluation_check")
def run_options(given: dict[str, Any]) -> dict[str, Any]:
    """The grid of one run from what the user gave (``settings``, ``queries``, ``subset``), with
    the defaults (every setting, N = 1; the subset from the config), checked: a bad value raises
    before any flow starts."""
    settings = list(dict.fromkeys(given.get("settings") or GRID))
    queries = list(dict.fromkeys(given.get("queries") or DEFAULT_QUERIES))
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        raise EvaluationError(
            f"unknown RefLVQA {'setting' if len(unknown) == 1 else 'settings'} {listed(unknown)}; "
            f"known: {', '.join(SETTINGS)}"
        )
    bad = [n for n in queries if not isinstance(n, int) or n not in QUERY_COUNTS]
    if bad:
        raise EvaluationError(
            f"--queries must be between {QUERY_COUNTS[0]} and {QUERY_COUNTS[-1]}, got {', '.join(map(str, bad))}"
        )
    subset = given.get("subset")
    if subset is not None and subset not in SUBSETS:
        raise EvaluationError(f"--subset must be one of {', '.join(SUBSETS)}, got {subset}")
    return {"settings": settings, "queries": queries, **({"subset": subset} if subset else {})}
