"""Stage 4: retrieval + entailment filtering of citations; release tables and statistics."""
from __future__ import annotations

import hashlib
import json
import math
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mmcurate.annotation.citations import (
    CHECK_FLAG, CHECK_IMAGE, CHECK_TEXT, cite, first_token_decision, image_doc_id,
)
from mmcurate.annotation.factcheck import SENTENCE as FC_SENTENCE
from mmcurate.annotation.reflvqa_tables import reflvqa_statistics, reflvqa_tables
from mmcurate.core.ids import sha256_bytes
from mmcurate.gating.requests import ChatResponse

DOCS = [
    {"doc_id": "eiffel", "title": "Eiffel Tower", "text": "The Eiffel Tower in Paris was completed in 1889 for the World's Fair."},
    {"doc_id": "bridge", "title": "Tower Bridge", "text": "Tower Bridge crosses the Thames in London and opened in 1894."},
    {"doc_id": "cat", "title": "Cat", "text": "Domestic cats are small carnivorous mammals kept as pets."},
    {"doc_id": "paris", "title": "Paris", "text": "Paris is the capital of France with many museums."},
]
SENTENCES = [
    ("The Eiffel Tower was completed in 1889.", True),
    ("I think it looks great.", False),
    ("Tower Bridge opened in 1894 in London.", True),
    ("Giraffes sleep four hours a day.", True),  # nothing in the corpus supports it
]


class BagOfWords:
    """Deterministic text encoder: hashed word counts (a stand-in for MiniLM in tests)."""

    name = "test-bag-of-words"
    dim = 64

    def encode_text(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


class ColourClip(BagOfWords):
    """Cross-modal stand-in: images by dominant colour, text by colour words."""

    name = "test-colour-clip"
    COLOURS = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255)}

    def __init__(self, shas):
        self.shas = shas  # sha -> colour name

    def encode_text(self, texts):
        return np.array([[float(c in t.lower()) + 1e-3 for c in self.COLOURS] for t in texts], dtype=np.float32)

    def encode_images(self, images):
        return np.array([[float(self.shas[sha256_bytes(b)] == c) + 1e-3 for c in self.COLOURS] for b in images],
                        dtype=np.float32)


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "kb.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    return str(path)


@pytest.fixture
def labelled(make_samples):
    """The fact-checkable stage's kept output for one pair."""
    table = make_samples([("p0", "c0", "Which towers are these?", " ".join(s for s, _ in SENTENCES), ["cd" * 32])])
    column = [[{"index": i, "text": s, "fact_checkable": fc} for i, (s, fc) in enumerate(SENTENCES)]]
    return table.append_column("sentences", pa.array(column, type=pa.list_(FC_SENTENCE)))


def run(labelled, corpus, tmp_path, **kw):
    args = dict(text_encoder=BagOfWords(), top_text=2, cache_dir=tmp_path / "idx", run_id="r")
    return cite(labelled, corpus, **{**args, **kw})


def test_lexical_entailment_filters_citations(labelled, corpus, tmp_path):
    result = run(labelled, corpus, tmp_path, text_entailment="lexical")
    sentences = result.kept["sentences"].to_pylist()[0]
    assert [s["text_citations"] for s in sentences] == [["eiffel"], [], ["bridge"], []]
    assert [s["flagged"] for s in sentences] == [False, False, False, True]
    assert all(s["image_citations"] == [] for s in sentences)
    judged = [d for d in result.decisions if d.check == CHECK_TEXT]
    assert len(judged) == 3 * 2  # 3 fact-checkable sentences x top 2 documents
    assert {d.model for d in judged} == {"lexical-overlap-v1"}
    assert {(d.detail["sentence"], d.context_id) for d in judged if d.verdict == "entail"} == {(0, "eiffel"), (2, "bridge")}
    assert all(d.verdict in ("entail", "reject") and isinstance(d.detail["score"], float) for d in judged)
    flags = [d for d in result.decisions if d.check == CHECK_FLAG]
    assert [(d.context_id, d.verdict) for d in flags] == [("s3", "flagged")]
    assert result.image_skipped == "no image entailment model configured"
    assert result.counts["flagged"] == 1 and result.counts["text_citations"] == 2
    # the index is cached on disk: a second run loads it instead of embedding the corpus again
    assert len(list((tmp_path / "idx").iterdir())) == 1
    again = run(labelled, corpus, tmp_path, text_entailment="lexical")
    assert again.kept.equals(result.kept)


def test_llm_entailment_with_scripted_yes_no(labelled, corpus, tmp_path, make_pool):
    judge = ([
        {"when_all": ["Document: Eiffel Tower.", "Statement: The Eiffel Tower was completed"], "answer": "Yes"},
        {"when_all": ["Document: Tower Bridge crosses", "Statement: Tower Bridge", "could not be read"], "answer": "no"},
        {"when_all": ["Document: Tower Bridge crosses", "Statement: Tower Bridge"], "answer": "I believe so"},
        {"when_all": ["Document: Paris.", "Statement: The Eiffel"], "answer": "perhaps"},
    ], "no", False)
    pool = make_pool({"judge": judge})
    result = run(labelled, corpus, tmp_path, text_entailment="llm:judge", pool=pool)
    sentences = result.kept["sentences"].to_pylist()[0]
    assert [s["text_citations"] for s in sentences] == [["eiffel"], [], [], []]
    assert [s["flagged"] for s in sentences] == [False, False, True, True]
    judged = {(d.detail["sentence"], d.context_id): d for d in result.decisions if d.check == CHECK_TEXT}
    assert {d.model for d in judged.values()} == {"llm:judge"}
    assert judged[(0, "eiffel")].verdict == "entail" and judged[(0, "eiffel")].detail["decided_by"] == "text"
    assert judged[(2, "bridge")].verdict == "reject"  # fixed by the one retry
    assert judged[(2, "bridge")].detail["raw"] == ["I believe so", "no"]
    if (0, "paris") in judged:  # retrieved second for sentence 0: "perhaps" twice is an error
        assert judged[(0, "paris")].verdict == "error"
    assert result.text_judge == "llm:judge"


def test_first_token_logprobs_decide():
    def response(top):
        return ChatResponse("k", "m", "whatever", None, False, 0.0, top_logprobs=top)

    decided = first_token_decision(response([{"Yes": math.log(0.5), " yes": math.log(0.1), "No": math.log(0.3)}]))
    assert decided[0] == "yes" and decided[1] == pytest.approx(0.6 / 0.9)
    assert first_token_decision(response([{"no": math.log(0.7), "yes": math.log(0.2)}]))[0] == "no"
    assert first_token_decision(response([{"Maybe": -0.1}])) is None  # falls back to the text
    assert first_token_decision(response(None)) is None


def test_image_citations_with_cross_modal_encoder_and_vlm(labelled, corpus, tmp_path, make_pool, store, png):
    colours = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255)}
    shas = {store.put(png(rgb)): name for name, rgb in colours.items()}
    red = next(s for s, c in shas.items() if c == "red")
    table = labelled.drop_columns(["sentences"]).append_column("sentences", pa.array(
        [[{"index": 0, "text": "The red bus is a Routemaster.", "fact_checkable": True},
          {"index": 1, "text": "The blue door is closed.", "fact_checkable": True}]], type=pa.list_(FC_SENTENCE)))
    vlm = ([{"when_all": ["Statement: The red bus"], "answer": "yes"}], "no", True)
    pool = make_pool({"vlm": vlm})
    result = run(table, corpus, tmp_path, text_entailment="lexical", image_corpus=list(shas), store=store,
                 cross_modal=ColourClip(shas), top_images=1, image_entailment="vlm", pool=pool)
    sentences = result.kept["sentences"].to_pylist()[0]
    assert sentences[0]["image_citations"] == [image_doc_id(red)]
    assert sentences[1]["image_citations"] == [] and sentences[1]["flagged"]
    images = [d for d in result.decisions if d.check == CHECK_IMAGE]
    assert [(d.context_id, d.verdict, d.model) for d in images][0] == (image_doc_id(red), "entail", "vlm")
    assert len(images) == 2 and images[1].verdict == "reject"
    assert result.image_skipped is None and result.image_judge == "vlm"
    kb = result.knowledge_base
    assert sorted(kb.filter(pc.equal(kb["modality"], "image"))["image"].to_pylist()) == sorted(shas)
    # without a cross-modal encoder the image step is skipped and said so, never faked
    skipped = run(table, corpus, tmp_path, text_entailment="lexical", image_corpus=list(shas), store=store,
                  image_entailment="vlm", pool=pool)
    assert "cross-modal" in skipped.image_skipped
    assert not any(d.check == CHECK_IMAGE for d in skipped.decisions)


def test_release_tables_schema_and_statistics(labelled, corpus, tmp_path):
    result = run(labelled, corpus, tmp_path, text_entailment="lexical")
    tables = reflvqa_tables(result.kept, result.knowledge_base)
    sentence = pa.struct([
        pa.field("index", pa.int32(), nullable=False), pa.field("text", pa.string(), nullable=False),
        pa.field("fact_checkable", pa.bool_(), nullable=False),
        pa.field("text_citations", pa.list_(pa.string()), nullable=False),
        pa.field("image_citations", pa.list_(pa.string()), nullable=False),
        pa.field("flagged", pa.bool_(), nullable=False),
    ])
    assert tables["qa"].schema.names == ["sample_id", "source_id", "question", "images", "answer", "sentences", "meta"]
    assert [f.type for f in tables["qa"].schema] == [
        pa.string(), pa.string(), pa.string(), pa.list_(pa.string()), pa.string(), pa.list_(sentence), pa.string()]
    assert tables["documents"].schema.names == ["doc_id", "modality", "text", "image", "title", "provenance"]
    assert tables["knowledge_base"].schema.names == ["doc_id", "modality", "text", "image", "title"]
    assert sorted(tables["documents"]["doc_id"].to_pylist()) == ["bridge", "eiffel"]  # cited only
    assert tables["knowledge_base"].num_rows == len(DOCS)
    provenance = json.loads(tables["documents"]["provenance"][0].as_py())
    assert provenance["corpus"] == corpus and provenance["id"] in ("bridge", "eiffel")
    assert tables["qa"]["answer"][0].as_py() == " ".join(s for s, _ in SENTENCES)
    stats = {row["statistic"]: row["value"] for row in reflvqa_statistics(tables)}
    assert stats["pairs"] == 1 and stats["unique_questions"] == 1 and stats["unique_images"] == 1
    assert stats["text_documents_per_question"] == 2.0 and stats["image_documents_per_question"] == 0.0
    assert stats["fact_checkable_share"] == 0.75
    assert stats["answer_words_mean"] == len(" ".join(s for s, _ in SENTENCES).split())


def test_lexical_threshold_in_the_spec_is_named():
    from mmcurate.annotation.citations import text_judge
    from mmcurate.core.errors import MmcurateError

    judge = text_judge("lexical:0.6", None)
    assert judge.threshold == 0.6 and judge.name == "lexical-overlap-v1@0.6"
    assert text_judge("lexical", None).name == "lexical-overlap-v1"
    with pytest.raises(MmcurateError, match="threshold must be a number"):
        text_judge("lexical:most", None)
