"""CRUISE's query-aware retrieval on CRAG-MM (seed 001, section 3.2, eq. 2-7).

1. Recall (eq. 3): ``K_recall`` (10) items from the image search (the query image against an
   image knowledge graph) and/or the web search (the expanded query ``q' = q || s``, the
   question and the query-aware image summary).
2. Chunking: from each item the knowledge graph's ``description``, ``caption`` and ``summary``
   fields (``kg_fields``), or a web page's snippet, split on newlines into paragraphs.
3. Reranking (eq. 4): every paragraph scored against ``q'`` by the reranker.
4. MAD cutoff (eq. 5-6, ``retrieval.cutoffs``): at most 3 paragraphs; ``S_ret`` is the best
   reranked score (``retrieval_score``), which Algorithm 1 tests on its own.
5. Context (eq. 7): the kept paragraphs, numbered, as text evidence.

Search backends:

- the project's indexes (the offline default): ``ImageKG``, a folder holding ``kg.jsonl`` (one
  line per knowledge-graph image: ``{"image": <path relative to the folder>, "url": ...,
  "entities": [{"entity_name", "entity_attributes": {...}}]}``, the shape of the competition's
  image search results with the image as a local file) searched with the configured image
  encoder through a cached FAISS index; ``WebIndex``, a text knowledge base (``retrieval.kb``
  forms) whose documents are pages (title, snippet) searched with the text encoder;
- the competition's own search package (``cragmm-search-pipeline``, facebookresearch/CRAG-MM
  ``docs/search_api.md``): ``UnifiedSearchPipeline(image_model_name, image_hf_dataset_id,
  text_model_name, web_hf_dataset_id)`` called as ``pipeline(PIL image or text, k=K)``; image
  results ``{index, score, url, entities: [{entity_name, entity_attributes}]}``, web results
  ``{index, score, page_name, page_snippet, page_url}``. An optional extra
  (``mmcurate[cragmm-search]``): its index is a Hub dataset it downloads itself.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mmcurate.core.errors import MmcurateError
from mmcurate.core.specs import CutoffSpec, KBSpec

from .cutoffs import Scale, apply_cutoff, retrieval_score
from .encoders import ImageEncoder, TextEncoder
from .kb import kb_fingerprint, load_kb
from .rerank import CrossEncoderReranker, Reranker
from .vector_index import cached_index

KG_FILE = "kg.jsonl"


@dataclass(frozen=True)
class Found:
    """One search result: where it came from, its search score and its text fields."""

    item_id: str
    source: str  # "image" or "web"
    score: float
    title: str
    texts: tuple[str, ...]


class Search(Protocol):
    name: str

    def images(self, image: bytes, k: int) -> list[Found]: ...

    def web(self, query: str, k: int) -> list[Found]: ...


def entity_texts(entities: Sequence[dict[str, Any]], fields: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """(the entities' names, the text of their ``fields``), as CRUISE extracts them."""
    names = [str(e.get("entity_name") or "") for e in entities]
    texts = []
    for entity in entities:
        attributes = entity.get("entity_attributes") or {}
        if isinstance(attributes, dict):
            texts += [str(attributes[f]) for f in fields if attributes.get(f)]
    return ", ".join(n for n in names if n), tuple(texts)


class ImageKG:
    """An image knowledge graph searched by image similarity (see the module docstring)."""

    def __init__(self, folder: Path, encoder: ImageEncoder, index_dir: Path, fields: Sequence[str]) -> None:
        path = folder / KG_FILE
        if not path.is_file():
            raise MmcurateError(f"image knowledge graph {folder}: no {KG_FILE}")
        self.items: list[dict[str, Any]] = []
        images: list[bytes] = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                image = (folder / record["image"]).resolve()
                if folder.resolve() not in image.parents:
                    raise ValueError("the image path leaves the folder")
                images.append(image.read_bytes())
                title, texts = entity_texts(record.get("entities") or [], fields)
            except (ValueError, KeyError, TypeError, OSError) as exc:
                raise MmcurateError(f"{path}:{number}: bad knowledge-graph line: {exc}") from None
            self.items.append({"id": record.get("url") or record["image"], "title": title, "texts": texts})
        if not self.items:
            raise MmcurateError(f"image knowledge graph {path} is empty")
        fingerprint = hashlib.sha256(b"".join(hashlib.sha256(i).digest() for i in images)).hexdigest()
        self.encoder = encoder
        self.index = cached_index(
            index_dir,
            "cragmm-image-kg",
            encoder.name,
            fingerprint,
            [str(n) for n in range(len(self.items))],
            lambda: encoder.encode_images(images),
        )

    def search(self, image: bytes, k: int) -> list[Found]:
        scores, rows = self.index.search(self.encoder.encode_images([image]), min(k, len(self.items)))
        return [
            Found(self.items[r]["id"], "image", float(s), self.items[r]["title"], self.items[r]["texts"])
            for r, s in zip(rows[0], scores[0])
            if r >= 0
        ]


class WebIndex:
    """Web pages (a text knowledge base: title and snippet) searched by the expanded query."""

    def __init__(self, kb: KBSpec, encoder: TextEncoder, index_dir: Path) -> None:
        table = load_kb(kb)
        if table.num_rows == 0:
            raise MmcurateError(f"web index {kb} holds no page with text")
        self.pages = table.select(["doc_id", "title", "text"]).to_pylist()
        self.encoder = encoder
        self.index = cached_index(
            index_dir,
            "cragmm-web",
            encoder.name,
            kb_fingerprint(table),
            [p["doc_id"] for p in self.pages],
            lambda: encoder.encode_text([f"{p['title']}. {p['text']}" for p in self.pages]),
        )

    def search(self, query: str, k: int) -> list[Found]:
        scores, rows = self.index.search(self.encoder.encode_text([query]), min(k, len(self.pages)))
        return [
            Found(self.pages[r]["doc_id"], "web", float(s), self.pages[r]["title"], (self.pages[r]["text"],))
            for r, s in zip(rows[0], scores[0])
            if r >= 0
        ]


class ProjectSearch:
    """The project's image and web indexes (either may be absent: that branch finds nothing)."""

    def __init__(self, image_kg: ImageKG | None, web_index: WebIndex | None) -> None:
        self.image_kg, self.web_index = image_kg, web_index
        parts = [
            f"image-kg:{image_kg.encoder.name}" if image_kg else "",
            f"web:{web_index.encoder.name}" if web_index else "",
        ]
        self.name = " + ".join(p for p in parts if p)

    def images(self, image: bytes, k: int) -> list[Found]:
        return self.image_kg.search(image, k) if self.image_kg else []

    def web(self, query: str, k: int) -> list[Found]:
        return self.web_index.search(query, k) if self.web_index else []


class CragmmSearchPipeline:
    """The competition's ``UnifiedSearchPipeline`` (optional extra; see the module docstring)."""

    def __init__(self, pipeline: Any, fields: Sequence[str], name: str = "cragmm-search-pipeline") -> None:
        self.pipeline = pipeline
        self.fields = list(fields)
        self.name = name

    @classmethod
    def load(
        cls,
        image_model_name: str,
        image_hf_dataset_id: str,
        text_model_name: str | None,
        web_hf_dataset_id: str | None,
        fields: Sequence[str],
    ) -> CragmmSearchPipeline:
        try:
            from cragmm_search.search import UnifiedSearchPipeline
        except ImportError:
            raise MmcurateError(
                "cruise.cragmm_search needs the competition's search package: pip install 'mmcurate[cragmm-search]'"
            ) from None
        pipeline = UnifiedSearchPipeline(
            image_model_name=image_model_name,
            image_hf_dataset_id=image_hf_dataset_id,
            text_model_name=text_model_name,
            web_hf_dataset_id=web_hf_dataset_id,
        )
        return cls(pipeline, fields, f"cragmm-search-pipeline:{image_hf_dataset_id}")

    def images(self, image: bytes, k: int) -> list[Found]:
        from PIL import Image

        with Image.open(io.BytesIO(image)) as img:
            results = self.pipeline(img.convert("RGB"), k=k) or []
        out = []
        for r in results:
            title, texts = entity_texts(r.get("entities") or [], self.fields)
            out.append(Found(str(r.get("url") or r.get("index")), "image", float(r.get("score", 0.0)), title, texts))
        return out

    def web(self, query: str, k: int) -> list[Found]:
        results = self.pipeline(query, k=k) or []
        return [
            Found(
                str(r.get("page_url") or r.get("index")),
                "web",
                float(r.get("score", 0.0)),
                str(r.get("page_name") or ""),
                (str(r.get("page_snippet") or ""),),
            )
            for r in results
        ]


def paragraphs(found: Sequence[Found]) -> list[tuple[Found, str]]:
    """Each result's text fields split on newlines into paragraph chunks (empty lines dropped)."""
    return [(item, line.strip()) for item in found for text in item.texts for line in text.split("\n") if line.strip()]


@dataclass
class Retrieved:
    """What one question's retrieval found: the context ``C`` (eq. 7), ``S_ret`` and the numbers."""

    context: list[dict[str, Any]]
    score: float  # S_ret on the [0, 1] scale; 0.0 when nothing was found
    detail: dict[str, Any] = field(default_factory=dict)


class Retriever:
    """Recall, chunk, rerank and cut for one question (see the module docstring)."""

    def __init__(self, search: Search, reranker: Reranker, cutoff: CutoffSpec, branch: str, k_recall: int = 10) -> None:
        self.search, self.reranker, self.cutoff, self.branch, self.k_recall = search, reranker, cutoff, branch, k_recall
        self.scale: Scale = "unit" if isinstance(reranker, CrossEncoderReranker) else "cosine"

    def warm(self) -> None:
        """Load what loads lazily (the reranker's or the web encoder's weights) before any turn is
        timed: loading models is not part of a turn's time."""
        self.reranker.scores("warm up", ["warm up"])
        if self.branch in ("web", "both"):
            self.search.web("warm up", 1)

    @property
    def components(self) -> dict[str, str]:
        return {
            "search": self.search.name,
            "reranker": self.reranker.name,
            "cutoff": str(self.cutoff),
            "search_branch": self.branch,
        }

    def retrieve(self, question: str, summary: str | None, image: bytes | None) -> Retrieved:
        expanded = f"{question.strip()} {summary.strip()}" if summary and summary.strip() else question.strip()
        found: list[Found] = []
        if self.branch in ("image", "both") and image is not None:
            found += self.search.images(image, self.k_recall)
        if self.branch in ("web", "both"):
            found += self.search.web(expanded, self.k_recall)
        chunks = paragraphs(found)
        scores = self.reranker.scores(expanded, [text for _, text in chunks]) if chunks else []
        cut = apply_cutoff(
            [((item, text), score) for (item, text), score in zip(chunks, scores)], self.cutoff, self.scale
        )
        context = [
            {"context_id": f"{item.item_id}#{n}", "modality": "text", "text": text, "title": f"Info {n}", "image": None}
            for n, ((item, text), _) in enumerate(cut.kept, 1)
        ]
        detail = {
            "query": expanded,
            "found": len(found),
            "chunks": len(chunks),
            **{k: v for k, v in cut.detail.items() if k not in ("retrieved",)},
        }
        return Retrieved(context, retrieval_score(cut), detail)
