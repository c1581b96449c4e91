"""Per-source negative mining (seed 003, appendix "Knowledge pairing"; issue 32 item 2): InfoSeek and
ViQuAE image-to-text over the KB's pages (top 10), Encyclopedic-VQA image-to-image against the first
image of each page (top 5), MRAG-Bench image-to-image over its own images (top 20, gold excluded),
WebQA and MMDocRAG the negatives their sources provide. Small built data; the offline encoders
(MiniLM, the classical descriptor) stand in for EVA-CLIP and the manifest's rows say so."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from mmcurate.annotation.deflectionbench.mining import mine_page_image_negatives
from mmcurate.annotation.deflectionbench.pairing import PairKnowledge
from mmcurate.benchmarks.deflectionbench import PAPER_MINING, DeflectionBenchConfig, RetrievalConfig, SourceMining
from mmcurate.core.config import load_config
from mmcurate.core.errors import ConfigError
from mmcurate.core.images import ImageStore
from mmcurate.retrieval.kb import page_image_documents

BUILDERS = Path(__file__).parents[2] / "fixtures" / "builders"
PAGES = {  # doc id -> (title, text, the page's first image)
    "cat": (
        "Domestic cat",
        "The domestic cat is a small carnivorous mammal. Cats groom themselves often. "
        "A cat sleeps for most of the day.",
        "skimage_chelsea",
    ),
    "coffee": (
        "Coffee",
        "Coffee is a drink brewed from roasted coffee beans. It is served hot in a cup.",
        "skimage_coffee",
    ),
    "rocket": (
        "Saturn V",
        "Saturn V was a rocket used by NASA for the Apollo program. It had three stages.",
        "skimage_rocket",
    ),
}


def images():
    spec = importlib.util.spec_from_file_location("fixture_builder_images", BUILDERS / "images.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_kb(folder: Path, with_images: bool = True, pages: dict[str, tuple[str, str, str]] = PAGES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for doc_id, (title, text, image) in pages.items():
        row = {"doc_id": doc_id, "title": title, "text": text}
        if with_images:
            (folder / f"{doc_id}.png").write_bytes(images().encode(image))
            row["image"] = f"{doc_id}.png"
        rows.append(row)
    (folder / "kb.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder / "kb.jsonl"


def test_the_papers_strategies_are_the_default():
    section = DeflectionBenchConfig(
        sources=[{"name": "webqa", "root": "."}],
        gating={"pool": ["m"]},
        mining={"mragbench": {"strategy": "image_to_image", "top_k": 4}},
    )
    plan = {source: (m.strategy, m.top_k) for source, m in section.mining.items()}
    assert plan["infoseek"] == plan["viquae"] == ("image_to_text", 10)
    assert plan["evqa"] == ("image_to_image_pages", 5)
    assert plan["mragbench"] == ("image_to_image", 4)  # the one source given; the rest keep the paper's
    assert section.mining["webqa"].strategy == section.mining["mmdocrag"].strategy == "source"
    assert PAPER_MINING["mragbench"] == SourceMining(strategy="image_to_image", top_k=20)


def test_image_to_image_pages_finds_the_page_by_its_first_image(tmp_path, make):
    """E-VQA: the query (a photo of the cat) is nearest the cat page's first image, so the top
    page's passages are the negatives, whatever the question's words say."""
    store = ImageStore(tmp_path / "images")
    cat = store.put(images().encode("skimage_chelsea"))
    docs = page_image_documents(str(write_kb(tmp_path / "kb")))
    assert [d["doc_id"] for d in docs] == list(PAGES) and docs[0]["image"] == tmp_path / "kb" / "cat.png"
    sample = make.sample("e", "Which rocket launched Apollo 11?", ["x"], source="evqa", images=[cat])
    cfg = RetrievalConfig(chunk_size=40, chunk_overlap=8)
    mined = mine_page_image_negatives(make.table([sample]), docs, cfg, store, tmp_path / "cache", 1)
    found = mined.negatives[sample["sample_id"]]
    assert found and {c.context_id.split("#")[0] for c in found} == {"kb:cat"}
    assert mined.filtered[sample["sample_id"]]["candidates"] == len(found)


def test_pairing_runs_each_sources_strategy_and_says_what_ran(world, make, tmp_path):
    images_ = images()
    store = ImageStore(tmp_path / "images")
    sha = {
        name: store.put(images_.encode(name))
        for name in ["skimage_chelsea", "skimage_coffee", "skimage_astronaut", "skimage_rocket", "sklearn_flower"]
    }
    kb = write_kb(tmp_path / "kb")
    info = make.sample(
        "i", "What drink is brewed from roasted beans?", ["tea"], source="infoseek", images=[sha["skimage_coffee"]]
    )
    evqa = make.sample("e", "What animal is this?", ["x"], source="evqa", images=[sha["skimage_chelsea"]])
    mrag = [
        make.sample(f"m{i}", "Which object?", ["x"], source="mragbench", images=[sha[name]])
        for i, name in enumerate(["skimage_astronaut", "skimage_rocket", "sklearn_flower", "skimage_coffee"])
    ]
    web = make.sample("w", "Q?", ["A"], source="webqa")  # the source gave no negatives: none are mined for it
    samples = make.table([info, evqa, *mrag, web])
    cfg = RetrievalConfig(kb=str(kb), chunk_size=40, chunk_overlap=8, max_text_negatives=3)
    mining = {**PAPER_MINING, "mragbench": SourceMining(strategy="image_to_image", top_k=2)}
    result = PairKnowledge(cfg, mining).run(samples, world.ctx(store=store))
    negatives = {r["source_id"]: r["negative_contexts"] for r in result.kept.to_pylist()}
    assert negatives["i"] and all(c["modality"] == "text" for c in negatives["i"])  # no image negatives
    assert {c["context_id"].split("#")[0] for c in negatives["e"]} <= {"kb:cat", "kb:coffee", "kb:rocket"}
    assert negatives["e"][0]["context_id"].startswith("kb:cat#")  # the page whose image is the query's
    assert all(
        len(negatives[f"m{i}"]) == 2 and {c["modality"] for c in negatives[f"m{i}"]} == {"image"} for i in range(4)
    )
    assert negatives["w"] == []
    checks = {d.sample_id: d.check for d in result.decisions}
    assert checks[web["sample_id"]] == "negatives.source" and checks[info["sample_id"]] == "negatives.mined"
    rows = {r["source"]: r for r in result.extra["mining"]}
    assert rows["infoseek"]["ran_as"].startswith(
        "image-to-text, queried with the question text: sentence-transformers/all-MiniLM-L6-v2 embeds no images"
    )
    assert rows["evqa"]["ran_as"].startswith("image-to-image against the first image of 3 KB pages")
    assert "classical descriptor standing in for the paper's EVA-CLIP" in rows["mragbench"]["ran_as"]
    assert (rows["mragbench"]["strategy"], rows["mragbench"]["top_k"]) == ("image_to_image", 2)
    assert (rows["webqa"]["strategy"], rows["webqa"]["top_k"], rows["webqa"]["samples_without_negatives"]) == (
        "source",
        None,
        1,
    )


def test_evqa_without_page_images_is_searched_image_to_text_and_says_so(world, make, tmp_path):
    store = ImageStore(tmp_path / "images")
    cat = store.put(images().encode("skimage_chelsea"))
    evqa = make.sample("e", "Which animal grooms itself often?", ["x"], source="evqa", images=[cat])
    cfg = RetrievalConfig(kb=str(write_kb(tmp_path / "kb", with_images=False)), chunk_size=40, chunk_overlap=8)
    result = PairKnowledge(cfg).run(make.table([evqa]), world.ctx(store=store))
    [row] = result.extra["mining"]
    assert row["ran_as"].startswith("the KB names no page image, so image-to-text")
    assert result.kept.to_pylist()[0]["negative_contexts"]


@pytest.mark.parametrize("strategy", ["image_to_text", "image_to_image_pages"])
def test_top_k_pages_bound_the_candidates(tmp_path, make, world, strategy):
    store = ImageStore(tmp_path / "images")
    cat = store.put(images().encode("skimage_chelsea"))
    sample = make.sample("s", "Which animal grooms itself often?", ["x"], source="evqa", images=[cat])
    cfg = RetrievalConfig(kb=str(write_kb(tmp_path / "kb")), chunk_size=400, chunk_overlap=8, max_text_negatives=10)
    mining = {**PAPER_MINING, "evqa": SourceMining(strategy=strategy, top_k=2)}
    result = PairKnowledge(cfg, mining).run(make.table([sample]), world.ctx(store=store))
    pages = {c["context_id"].split("#")[0] for c in result.kept.to_pylist()[0]["negative_contexts"]}
    assert len(pages) == 2  # one passage per page here: the top 2 of 3 pages


def test_page_images_are_read_from_parquet_kbs_and_rows_without_one_are_left_out(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "kb"
    folder.mkdir()
    pq.write_table(
        pa.table(
            {"doc_id": ["a", "b"], "title": ["A", "B"], "text": ["page a", "page b"], "image": ["imgs/a.jpg", None]}
        ),
        folder / "pages.parquet",
    )
    assert page_image_documents(str(folder)) == [
        {"doc_id": "a", "title": "A", "text": "page a", "image": folder / "imgs" / "a.jpg"}
    ]
    assert page_image_documents("wiki-offline") == []


EVQA_PAGES = {  # E-VQA's own KB: other pages than the shared one's (seed 003, L1403-1408)
    "evqa-cat": (
        "Felis catus",
        "Felis catus is the cat of the encyclopedic KB. It hunts mice at night.",
        "skimage_chelsea",
    ),
    "evqa-rocket": (
        "Apollo program",
        "The Apollo program landed the first people on the Moon in 1969.",
        "skimage_rocket",
    ),
}


def test_each_source_mines_its_own_kb_and_the_shared_one_is_the_fallback(world, make, tmp_path):
    """Issue 43 item 5: E-VQA mines "the dataset-provided collection of Wikipedia pages ... which
    differs from the full 6M-page dump used for InfoSeek" (seed 003, L1403-1408): a source's
    ``mining.<source>.kb`` is searched for it, the shared ``retrieval.kb`` for the others."""
    store = ImageStore(tmp_path / "images")
    cat, coffee = (store.put(images().encode(name)) for name in ("skimage_chelsea", "skimage_coffee"))
    shared = write_kb(tmp_path / "shared")
    own = write_kb(tmp_path / "evqa-kb", pages=EVQA_PAGES)
    info = make.sample("i", "What drink is brewed from roasted beans?", ["tea"], source="infoseek", images=[coffee])
    evqa = make.sample("e", "What animal is this?", ["x"], source="evqa", images=[cat])
    cfg = RetrievalConfig(kb=str(shared), chunk_size=40, chunk_overlap=8, max_text_negatives=3)
    section = DeflectionBenchConfig(
        sources=[{"name": "evqa", "root": "."}], gating={"pool": ["m"]}, mining={"evqa": {"kb": str(own)}}
    )
    assert (section.mining["evqa"].strategy, section.mining["evqa"].top_k) == ("image_to_image_pages", 5)
    result = PairKnowledge(cfg, section.mining).run(make.table([info, evqa]), world.ctx(store=store))
    negatives = {
        r["source_id"]: {c["context_id"].split("#")[0] for c in r["negative_contexts"]} for r in result.kept.to_pylist()
    }
    assert negatives["e"] and negatives["e"] <= {"kb:evqa-cat", "kb:evqa-rocket"}
    assert negatives["i"] and negatives["i"] <= {"kb:cat", "kb:coffee", "kb:rocket"}
    rows = {r["source"]: r for r in result.extra["mining"]}
    assert rows["evqa"]["ran_as"].endswith(f"; over its own knowledge base {own}")
    assert "own knowledge base" not in rows["infoseek"]["ran_as"]
    assert result.components["knowledge_base"] == f"{shared}; evqa: {own}"


def test_a_source_kb_is_refused_where_no_kb_is_searched(tmp_path):
    path = tmp_path / "cfg.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "deflectionbench": {
                    "sources": [{"name": "mragbench", "root": "."}],
                    "gating": {"pool": ["m"]},
                    "mining": {"mragbench": {"kb": "wiki-offline"}},
                },
                "models": {"m": {"backend": "scripted", "script": "s.jsonl"}},
            }
        )
    )
    with pytest.raises(
        ConfigError,
        match=r"deflectionbench\.mining\.mragbench.*kb is searched only by "
        r"image_to_text and image_to_image_pages, not image_to_image",
    ):
        load_config(path)
