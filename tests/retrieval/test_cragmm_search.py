"""CRUISE's search backends: the project's web index (q' = q || s), the competition's search
package mapped to the same results (its documented result shape; its real API on a tiny local
index where the package is installed)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from PIL import Image

from mmcurate.core.specs import MadCutoff
from mmcurate.retrieval.cragmm_search import CragmmSearchPipeline, Found, ProjectSearch, Retriever, WebIndex
from mmcurate.retrieval.encoders import text_encoder
from mmcurate.retrieval.rerank import reranker

FIELDS = ["description", "caption", "summary"]


def test_the_web_branch_searches_with_the_expanded_query(fixtures_root: Path, tmp_path: Path) -> None:
    web = WebIndex(str(fixtures_root / "cragmm" / "web" / "pages.jsonl"), text_encoder("minilm"), tmp_path)
    top = web.search("does it need full sun? A red dahlia flower in bloom.", 1)
    assert [f.item_id for f in top] == ["web:dahlia"] and top[0].texts == (
        "Dahlias need full sun and well-drained soil.",
    )
    retriever = Retriever(ProjectSearch(None, web), reranker("minilm"), MadCutoff(), "web", k_recall=3)
    found = retriever.retrieve("does it need full sun?", "A red dahlia flower in bloom.", None)
    assert found.detail["query"] == "does it need full sun? A red dahlia flower in bloom."
    assert found.context[0]["text"] == "Dahlias need full sun and well-drained soil."
    assert 0.0 < found.score <= 1.0 and found.detail["found"] == 3


class DocumentedPipeline:
    """Answers as facebookresearch/CRAG-MM docs/search_api.md shows ``UnifiedSearchPipeline`` does."""

    def __call__(self, query, k=5):
        if isinstance(query, str):
            return [
                {
                    "index": "https://en.wikipedia.org/wiki/Dahlia_chunk_2",
                    "score": 0.57,
                    "page_name": "Dahlia",
                    "page_snippet": "Dahlias need full sun.",
                    "page_url": "https://en.wikipedia.org/wiki/Dahlia",
                }
            ][:k]
        assert isinstance(query, Image.Image)
        return [
            {
                "index": 17030,
                "score": 0.91,
                "url": "https://example.org/8_Spruce.jpg",
                "entities": [
                    {
                        "entity_name": "8 Spruce Street",
                        "entity_attributes": {
                            "name": "8 Spruce Street",
                            "architect": "Frank Gehry",
                            "description": "A skyscraper.\\nIn Manhattan.",
                        },
                    }
                ],
            }
        ][:k]


def test_the_competition_package_results_map_to_found_items() -> None:
    search = CragmmSearchPipeline(DocumentedPipeline(), FIELDS)
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buffer, format="PNG")
    [image] = search.images(buffer.getvalue(), 2)
    assert image == Found(
        "https://example.org/8_Spruce.jpg", "image", 0.91, "8 Spruce Street", ("A skyscraper.\\nIn Manhattan.",)
    )
    [page] = search.web("dahlia sun", 2)
    assert (page.item_id, page.title, page.texts) == (
        "https://en.wikipedia.org/wiki/Dahlia",
        "Dahlia",
        ("Dahlias need full sun.",),
    )


def test_the_competition_package_on_a_tiny_local_index(tmp_path: Path, monkeypatch, fixtures_root: Path) -> None:
    """Its real ``UnifiedSearchPipeline`` over a two-image chromadb index and a tiny random CLIP
    saved here; the Hub download is replaced by the local index folder."""
    package = pytest.importorskip(
        "cragmm_search.search",
        reason="cragmm-search-pipeline is not installed "
        "(optional extra mmcurate[cragmm-search]; it pulls chromadb and lmdb)",
    )
    import chromadb
    from cragmm_search.image_search_mock_api import image_kg
    from cragmm_search.image_search_mock_api.image_search import extract_features
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    small = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}
    model = CLIPModel(
        CLIPConfig(
            text_config={**small, "vocab_size": 64, "max_position_embeddings": 16},
            vision_config={**small, "image_size": 32, "patch_size": 16},
            projection_dim=8,
        )
    )
    model.save_pretrained(tmp_path / "clip")
    processor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    monkeypatch.setattr(package.CLIPProcessor, "from_pretrained", classmethod(lambda cls, *a, **k: processor))
    images = {
        name: (fixtures_root / "cragmm" / "image_kg" / "images" / f"{name}.jpg").read_bytes()
        for name in ("skimage_chelsea", "skimage_rocket")
    }
    client = chromadb.PersistentClient(path=str(tmp_path / "index"))
    collection = client.create_collection(name="image_embeddings", metadata={"hnsw:space": "cosine"})
    for n, (name, data) in enumerate(images.items()):
        entity = {"tabby cat": {"description": "A striped cat."}, "rocket": {"description": "A vehicle."}}
        key = "tabby cat" if name == "skimage_chelsea" else "rocket"
        vector = extract_features(model, processor, Image.open(io.BytesIO(data)).convert("RGB"))
        collection.add(
            ids=[str(n)],
            embeddings=vector.tolist(),
            metadatas=[
                {
                    "image_url": f"https://example.org/{name}.jpg",
                    "entities": json.dumps([key]),
                    "info": json.dumps({key: entity[key]}),
                }
            ],
        )
    monkeypatch.setattr(image_kg, "snapshot_download", lambda **kwargs: str(tmp_path / "index"))
    pipeline = package.UnifiedSearchPipeline(image_model_name=str(tmp_path / "clip"), image_hf_dataset_id="local/tiny")
    search = CragmmSearchPipeline(pipeline, FIELDS)
    [top] = search.images(images["skimage_chelsea"], 1)
    assert (top.item_id, top.title, top.texts) == (
        "https://example.org/skimage_chelsea.jpg",
        "tabby cat",
        ("A striped cat.",),
    )
