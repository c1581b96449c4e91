"""Negative mining over the fixture KB and an image pool: the gold contexts never become distractors; the
leakage filter decides what else goes before reranking (the paper: nothing, eq. 5 removes leaks later)."""

from __future__ import annotations

import importlib
import io
import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from PIL import Image, ImageOps

from mmcurate.annotation.deflectionbench.mining import DistractorFilter, mine_image_negatives, mine_text_negatives
from mmcurate.benchmarks.deflectionbench import RetrievalConfig
from mmcurate.core.errors import MmcurateError
from mmcurate.core.images import ImageStore
from mmcurate.core.records import Context, Sample
from mmcurate.core.schema import SAMPLE
from mmcurate.core.text import normalize
from mmcurate.retrieval.chunking import chunk_text
from mmcurate.retrieval.encoders import text_encoder
from mmcurate.retrieval.kb import load_kb
from mmcurate.retrieval.kb_pages import TablePages

BUILDERS = Path(__file__).parents[2] / "fixtures" / "builders"
CFG = RetrievalConfig(chunk_size=100, chunk_overlap=16, max_text_negatives=8)
PAGES, IMAGES = 4, 3  # top pages (image_to_text), top images (image_to_image)
STRICT = RetrievalConfig(**{**CFG.model_dump(), "leakage_filter": "answer_or_overlap"})  # the pre-issue-21 rules
MOON_Q = "Which mission made the first crewed landing on the Moon?"
CAT_Q = "Why do cats' eyes shine at night?"


def builder(name: str):
    return importlib.import_module(f"tests.fixtures.builders.{name}")


def pages(kb: pa.Table, cache: Path, cfg: RetrievalConfig = CFG) -> TablePages:
    return TablePages(kb, cache, text_encoder(cfg.text_encoder))


def table(samples: list[Sample]) -> pa.Table:
    return pa.Table.from_pylist([s.to_row() for s in samples], schema=SAMPLE)


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> pa.Table:
    return load_kb(str(builder("kb").build(tmp_path_factory.mktemp("kb"))))


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One index cache for the module: the KB is embedded once, as in a real run."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> ImageStore:
    return ImageStore(tmp_path_factory.mktemp("images"))


def passage_text(kb: pa.Table, context_id: str) -> str:
    doc_id, number = re.fullmatch(r"kb:(.+)#(\d+)", context_id).groups()
    text = kb["text"].to_pylist()[kb["doc_id"].to_pylist().index(doc_id)]
    return chunk_text(text, CFG.chunk_unit, CFG.chunk_size, CFG.chunk_overlap)[int(number)]


def test_the_paper_removes_only_gold_and_counts_what_each_rule_removes(
    kb: pa.Table, store: ImageStore, cache: Path
) -> None:
    """eq. 2 of seed 003 removes the gold contexts only: a passage that holds the answer stays a
    candidate (the eq. 5 oracle check removes it if a model answers with it); the stricter
    filters remove it before reranking, and each rule's removals are counted."""
    sample = Sample("test", "apollo", MOON_Q, answers=["Apollo 11"])
    assert CFG.leakage_filter == "none"  # the default follows the paper
    paper = mine_text_negatives(table([sample]), pages(kb, cache), CFG, store, PAGES)
    assert any("apollo 11" in normalize(c.text) for c in paper.negatives[sample.sample_id])
    counts = paper.filtered[sample.sample_id]
    assert counts["candidates"] > 0 and counts["answer"] == counts["overlap"] == counts["gold"] == 0
    answer_only = RetrievalConfig(**{**CFG.model_dump(), "leakage_filter": "answer"})
    for cfg in (answer_only, STRICT):
        mined = mine_text_negatives(table([sample]), pages(kb, cache), cfg, store, PAGES)
        negatives = mined.negatives[sample.sample_id]
        assert 0 < len(negatives) <= CFG.max_text_negatives
        assert not any("apollo 11" in normalize(c.text) for c in negatives)
        removed = mined.filtered[sample.sample_id]
        assert removed["answer"] > 0 and removed["candidates"] == counts["candidates"]
    for context in paper.negatives[sample.sample_id]:
        assert context.modality == "text" and context.image is None and context.title
        assert re.fullmatch(r"kb:[a-z0-9-]+#\d+", context.context_id)
        assert context.text == passage_text(kb, context.context_id)
    assert len({c.context_id for c in negatives}) == len(negatives)
    assert any(c.context_id.startswith(("kb:moon#", "kb:saturn-v#", "kb:apollo-program#")) for c in negatives[:3])


def test_gold_passages_always_go_near_copies_under_the_overlap_rule(
    kb: pa.Table, store: ImageStore, cache: Path
) -> None:
    control = Sample("test", "cat-control", CAT_Q, answers=[])
    top = mine_text_negatives(table([control]), pages(kb, cache), CFG, store, PAGES).negatives[control.sample_id]
    first, second = top[0], top[1]
    edited = first.text.replace("Cats", "Domestic cats", 1).replace(".", ";", 1)  # a lightly edited copy
    same_id = Sample(
        "test", "by-id", CAT_Q, answers=[], gold_contexts=[Context(second.context_id, "text", text="unrelated words")]
    )
    same_text = Sample(
        "test", "by-copy", CAT_Q, answers=[], gold_contexts=[Context("gold:0", "text", text=f" {first.text.upper()} ")]
    )
    near_copy = Sample("test", "by-text", CAT_Q, answers=[], gold_contexts=[Context("gold:1", "text", text=edited)])
    paper = mine_text_negatives(table([same_id, same_text, near_copy]), pages(kb, cache), CFG, store, PAGES)
    strict = mine_text_negatives(table([same_id, same_text, near_copy]), pages(kb, cache), STRICT, store, PAGES)
    for mined in (paper, strict):
        assert second.context_id not in [c.context_id for c in mined.negatives[same_id.sample_id]]
        assert first.context_id in [c.context_id for c in mined.negatives[same_id.sample_id]]
        assert first.context_id not in [c.context_id for c in mined.negatives[same_text.sample_id]]
        assert mined.filtered[same_id.sample_id]["gold"] == 1 == mined.filtered[same_text.sample_id]["gold"]
    assert first.context_id in [c.context_id for c in paper.negatives[near_copy.sample_id]]  # not the gold itself
    assert first.context_id not in [c.context_id for c in strict.negatives[near_copy.sample_id]]
    assert strict.filtered[near_copy.sample_id]["overlap"] >= 1 and paper.filtered[near_copy.sample_id]["overlap"] == 0
    assert second.context_id in [c.context_id for c in strict.negatives[near_copy.sample_id]]


def test_distractor_filter_definition() -> None:
    words = " ".join(f"word{i}" for i in range(40))
    gold = {
        "answers": ["Neil Armstrong"],
        "gold_contexts": [{"context_id": "g", "modality": "text", "text": words, "image": None, "title": None}],
    }
    removes = DistractorFilter(gold, "answer_or_overlap").removes
    assert removes("It was NEIL armstrong's step.", "kb:x#0") == "answer"  # answer, any case/punctuation
    assert removes("Armstrong-Neil is not the answer order.", "kb:x#0") is None
    assert removes(" ".join(f"word{i}" for i in range(10, 30)), "kb:x#1") == "overlap"  # contained in gold
    half = " ".join([f"word{i}" for i in range(25)] + [f"other{i}" for i in range(15)])
    assert removes(half, "kb:x#2") == "overlap"  # shares >= 50% of 5-grams
    mostly_new = " ".join([f"word{i}" for i in range(6)] + [f"other{i}" for i in range(34)])
    assert removes(mostly_new, "kb:x#3") is None
    assert removes("fresh text", "g") == "gold"  # the gold context id itself
    assert removes(words.upper() + "!", "kb:x#4") == "gold"  # the gold text itself
    answer_only = DistractorFilter(gold, "answer").removes
    assert answer_only("It was NEIL armstrong's step.", "kb:x#0") == "answer"
    assert answer_only(half, "kb:x#2") is None
    paper = DistractorFilter(gold).removes  # the default: the paper's eq. 2
    assert paper("It was NEIL armstrong's step.", "kb:x#0") is None and paper(half, "kb:x#2") is None
    assert paper("fresh text", "g") == "gold" and paper(words, "kb:x#5") == "gold"
    category = {"answers": ["cat"], "gold_contexts": []}  # one answer rule everywhere: whole words
    assert DistractorFilter(category, "answer").removes("Every category of animal.", "kb:y#0") is None
    assert DistractorFilter(category, "answer").removes("The cat sat.", "kb:y#0") == "answer"


def test_mining_is_deterministic_and_reuses_the_cached_index(kb: pa.Table, store: ImageStore, cache: Path) -> None:
    samples = table(
        [
            Sample("test", "apollo", MOON_Q, answers=["Apollo 11"]),
            Sample("test", "cat", CAT_Q, answers=["tapetum lucidum"]),
        ]
    )
    first = mine_text_negatives(samples, pages(kb, cache), CFG, store, PAGES)
    folders = sorted(p.name for p in cache.iterdir())
    again = mine_text_negatives(samples, pages(kb, cache), CFG, store, PAGES)
    assert again == first
    assert sorted(p.name for p in cache.iterdir()) == folders
    assert [p for p in folders if p.startswith("kb-pages-")]
    empty = mine_text_negatives(samples, pages(kb.slice(0, 0), cache), CFG, store, PAGES)
    assert empty.negatives == {sid: [] for sid in samples["sample_id"].to_pylist()}
    assert all(counts["candidates"] == 0 for counts in empty.filtered.values())


def test_a_kb_beyond_the_memory_budget_is_mined_the_same_through_the_store(
    kb: pa.Table, store: ImageStore, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fixture KB forced onto the on-disk path (its store, IVF-PQ and re-scoring): with 15
    candidates per result, a top 4 re-scores all 60 pages, so the mining must match the in-memory
    index exactly, reading page texts back from the store's records."""
    from mmcurate.retrieval import kb_pages
    from mmcurate.retrieval.index_plan import IndexPlan

    source = tmp_path / "kb.jsonl"
    source.write_text(
        "".join(
            json.dumps({"doc_id": d, "title": t, "text": x}) + "\n"
            for d, t, x in zip(kb["doc_id"].to_pylist(), kb["title"].to_pylist(), kb["text"].to_pylist())
        )
    )
    cfg = RetrievalConfig(**{**CFG.model_dump(), "kb": str(source)})
    plan = IndexPlan("ivfpq", {"nlist": 1, "m": 8, "nbits": 4, "opq": False, "candidates_per_result": 15})
    monkeypatch.setattr(kb_pages, "plan_index", lambda n, dim, memory_gb: plan)
    on_disk = kb_pages.open_kb_pages(cfg, tmp_path / "indexes", progress=lambda line: None)
    assert isinstance(on_disk, kb_pages.StorePages) and on_disk.index.store.complete()
    samples = table(
        [
            Sample("test", "apollo", MOON_Q, answers=["Apollo 11"]),
            Sample("test", "cat", CAT_Q, answers=["tapetum lucidum"]),
        ]
    )
    assert mine_text_negatives(samples, on_disk, cfg, store, PAGES) == mine_text_negatives(
        samples, pages(kb, cache), CFG, store, PAGES
    )
    record = on_disk.record()
    assert (record["kind"], record["count"], record["factory"]) == ("ivfpq", 60, "IVF1,PQ8x4np")
    assert record["recall_at_10"] == 1.0 and record["build_seconds"] >= 0


def flipped(data: bytes) -> bytes:
    buf = io.BytesIO()
    ImageOps.mirror(Image.open(io.BytesIO(data)).convert("RGB")).save(buf, format="PNG")
    return buf.getvalue()


def test_image_negatives_exclude_own_and_gold_images(store: ImageStore, tmp_path: Path) -> None:
    images = builder("images")
    sha = {
        name: store.put(images.encode(name))
        for name in [
            "skimage_coffee",
            "skimage_chelsea",
            "skimage_astronaut",
            "skimage_rocket",
            "sklearn_china",
            "sklearn_flower",
        ]
    }
    cat_mirror = store.put(flipped(images.encode("skimage_chelsea")))
    coffee_mirror = store.put(flipped(images.encode("skimage_coffee")))
    gold = lambda h: Context(f"gold:{h[:8]}", "image", image=h)  # noqa: E731
    coffee = Sample(
        "test",
        "coffee",
        "What drink is this?",
        ["coffee"],
        images=[sha["skimage_coffee"]],
        gold_contexts=[gold(coffee_mirror)],
    )
    cat = Sample("test", "cat", "What animal is this?", ["cat"], images=[sha["skimage_chelsea"]])
    space = Sample(
        "test",
        "space",
        "Who is this?",
        ["astronaut"],
        images=[sha["skimage_astronaut"]],
        gold_contexts=[gold(cat_mirror), gold(sha["skimage_rocket"])],
    )
    text_only = Sample("test", "text", "Which temple?", ["pagoda"], gold_contexts=[gold(sha["sklearn_china"])])
    nothing = Sample("test", "none", "What?", ["x"])
    other = Sample("test", "flower", "Which flower?", ["rose"], images=[sha["sklearn_flower"]])
    samples = table([coffee, cat, space, text_only, nothing, other])
    mined = mine_image_negatives(samples, store, CFG, tmp_path, IMAGES)

    assert mined[nothing.sample_id] == []
    excluded = {
        coffee.sample_id: {sha["skimage_coffee"], coffee_mirror},
        space.sample_id: {sha["skimage_astronaut"], cat_mirror, sha["skimage_rocket"]},
    }
    for sid, shas in excluded.items():
        assert len(mined[sid]) == IMAGES
        assert not {c.image for c in mined[sid]} & shas
    assert mined[cat.sample_id][0].image == cat_mirror  # someone else's gold image is a fine distractor
    assert sha["sklearn_china"] not in {c.image for c in mined[text_only.sample_id]}
    for context in mined[coffee.sample_id]:
        assert context.context_id == f"img:{context.image[:16]}" and context.modality == "image"
        assert context.text is None and context.title is None
    assert mine_image_negatives(samples, store, CFG, tmp_path, IMAGES) == mined


def test_image_missing_from_store_is_a_clear_error(store: ImageStore, tmp_path: Path) -> None:
    lost = Sample("test", "lost", "What?", ["x"], images=["ab" * 32])
    with pytest.raises(MmcurateError, match="is not in the image store"):
        mine_image_negatives(table([lost]), store, CFG, tmp_path, IMAGES)


def tiny_clip_spec(folder: Path) -> str:
    import json

    import open_clip
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    config = {
        "embed_dim": 24,
        "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 8, "head_width": 16},
        "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
    }
    (folder / "mining-clip.json").write_text(json.dumps(config))
    open_clip.add_model_config(folder / "mining-clip.json")
    torch.manual_seed(1)
    torch.save(open_clip.create_model("mining-clip").state_dict(), folder / "mining-clip.pt")
    return f"open_clip:mining-clip:{folder / 'mining-clip.pt'}"


def test_open_clip_text_encoder_queries_with_the_image(kb: pa.Table, store: ImageStore, tmp_path: Path) -> None:
    from mmcurate.annotation.deflectionbench.mining import _text_queries
    from mmcurate.retrieval.encoders import cross_modal_encoder

    spec = tiny_clip_spec(tmp_path / "clip")
    cfg = RetrievalConfig(**{**CFG.model_dump(), "text_encoder": spec})
    image = store.put(builder("images").encode("skimage_rocket"))
    with_image = Sample("test", "rocket", "What is this?", ["Saturn V"], images=[image])
    text_only = Sample("test", "plain", MOON_Q, ["Apollo 11"])
    rows = table([with_image, text_only]).to_pylist()
    queries = _text_queries(rows, cross_modal_encoder(spec), cfg, store)
    clip = cross_modal_encoder(spec)
    np.testing.assert_allclose(queries[0], clip.encode_images([store.read(image)])[0], atol=1e-5)  # image-to-text
    np.testing.assert_allclose(queries[1], clip.encode_text([MOON_Q])[0], atol=1e-5)
    cfg = RetrievalConfig(**{**cfg.model_dump(), "leakage_filter": "answer"})
    mined = mine_text_negatives(
        table([with_image, text_only]), pages(kb, tmp_path / "cache", cfg), cfg, store, PAGES
    ).negatives
    assert 0 < len(mined[with_image.sample_id]) <= CFG.max_text_negatives
    assert not any("saturn v" in normalize(c.text) for c in mined[with_image.sample_id])
    assert not any("apollo 11" in normalize(c.text) for c in mined[text_only.sample_id])
