"""RAG retrieval over a knowledge base with deterministic stub encoders: top-N, rerank, top-K,
images through a cross-modal encoder or (the stand-in) their source captions, the averaged
query embedding, one reranking stage over text and image candidates (or, the other reading,
the two rankings fused by reciprocal rank)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from mmcurate.core.errors import MmcurateError
from mmcurate.core.specs import MadCutoff, TopK
from mmcurate.releases.reflvqa.tables import KNOWLEDGE_BASE
from mmcurate.retrieval.rag import RRF_K, Hit, RagCorpus, retrieve

VOCAB = ["tower", "paris", "london", "banana", "yellow", "tall", "red", "green"]


def bag(text: str) -> np.ndarray:
    words = text.lower().replace(".", " ").split()
    v = np.array([float(words.count(w)) for w in VOCAB]) + 1e-3
    return (v / np.linalg.norm(v)).astype(np.float32)


class Words:
    name, dim = "stub-words", len(VOCAB)

    def encode_text(self, texts):
        return np.stack([bag(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)


class Colours(Words):
    """Cross-modal stub: an image's bytes are a colour word."""

    name = "stub-colours"

    def encode_images(self, images):
        return np.stack([bag(data.decode()) for data in images])


class Shortest:
    """Reranker stub: prefers shorter passages."""

    name = "stub-shortest"

    def scores(self, query, passages):
        return [-float(len(p)) for p in passages]


def corpus_table(with_images: bool = False) -> pa.Table:
    rows = [
        {
            "doc_id": "d1",
            "modality": "text",
            "text": "The tower in Paris is tall, a tall tall tower.",
            "image": None,
            "title": "Eiffel",
        },
        {"doc_id": "d2", "modality": "text", "text": "Tower of London.", "image": None, "title": ""},
        {"doc_id": "d3", "modality": "text", "text": "Banana is yellow.", "image": None, "title": "Fruit"},
    ]
    if with_images:
        rows += [
            {"doc_id": "image:r", "modality": "image", "text": None, "image": "r", "title": None},
            {"doc_id": "image:g", "modality": "image", "text": None, "image": "g", "title": None},
        ]
    return pa.Table.from_pylist(rows, schema=KNOWLEDGE_BASE)


IMAGES = {"r": b"red tower", "g": b"green banana"}


def test_first_stage_rerank_and_cutoff(tmp_path):
    corpus = RagCorpus(corpus_table(), tmp_path, Words(), Shortest(), candidates=2)
    [first] = corpus.first_stage(["tall tower in paris"])
    assert [h.doc_id for h in first] == ["d1", "d2"]  # the two nearest; d3 is not a candidate
    [ranked] = corpus.rank(["tall tower in paris"])
    assert [h.doc_id for h in ranked] == ["d2", "d1"]  # reranked: shorter first
    assert ranked[0].score == -len("Tower of London.")
    assert retrieve(["tall tower in paris"], corpus, 1) == [[ranked[0]]]
    assert [h.doc_id for h in corpus.first_stage(["tall tower in paris"], k=100)[0]] == ["d1", "d2", "d3"]
    assert corpus.components["image_retriever"] == "none"
    assert corpus.notes == [
        "text documents searched with the query text alone (stub-words embeds no images, so no "
        "averaged query embedding)"
    ]


def test_a_bi_encoder_over_the_retrieval_encoder_keeps_the_first_stage_order(tmp_path):
    same = Shortest()
    same.name = "bi-encoder:stub-words"
    corpus = RagCorpus(corpus_table(), tmp_path, Words(), same)
    assert corpus.rank(["tall tower in paris"]) == corpus.first_stage(["tall tower in paris"])


def test_without_a_cross_modal_encoder_images_are_found_by_their_source_captions(tmp_path):
    table = corpus_table(with_images=True)
    titled = pa.Table.from_pylist(
        [{**r, "title": "A red tower"} if r["doc_id"] == "image:r" else r for r in table.to_pylist()],
        schema=KNOWLEDGE_BASE,
    )
    corpus = RagCorpus(titled, tmp_path, Words(), Shortest())
    assert [h.doc_id for h in corpus.rank(["red tower"], ("image",))[0]] == ["image:r"]  # image:g has no caption
    assert corpus.components["image_retriever"] == "captions:stub-words"
    assert corpus.notes[0] == (
        "image documents: no cross-modal encoder configured; a stand-in finds them by the "
        "caption their source gives them (title, alt text) with stub-words; 1 of 2 image "
        "documents carry no caption and cannot be retrieved"
    )
    bare = RagCorpus(table, tmp_path, Words(), Shortest())
    assert bare.rank(["red tower"], ("image",)) == [[]] and "2 of 2 image documents" in bare.notes[0]
    assert {h.modality for h in bare.rank(["red tower"])[0]} == {"text"}
    with pytest.raises(MmcurateError, match="read_image"):
        RagCorpus(table, tmp_path, Words(), Shortest(), Colours())


def test_each_setting_searches_its_own_modalities(tmp_path):
    corpus = RagCorpus(
        corpus_table(with_images=True),
        tmp_path,
        Words(),
        Shortest(),
        Colours(),
        IMAGES.__getitem__,
        query_embedding="text",
        fusion="rrf",
    )
    assert {h.modality for h in corpus.rank(["red tower"], ("text",))[0]} == {"text"}
    assert [h.doc_id for h in corpus.rank(["red tower"], ("image",))[0]] == ["image:r", "image:g"]
    assert {h.modality for h in corpus.rank(["red tower"])[0]} == {"text", "image"}
    assert (corpus.score_scale(("text",)), corpus.score_scale(("image",)), corpus.score_scale()) == (
        "cosine",
        "cosine",
        None,
    )


def test_the_averaged_query_embedding_brings_in_the_question_image(tmp_path):
    images = {**IMAGES, "q": b"green green banana"}
    average = RagCorpus(corpus_table(with_images=True), tmp_path, Words(), Shortest(), Colours(), images.__getitem__)
    text = RagCorpus(
        corpus_table(with_images=True),
        tmp_path,
        Words(),
        Shortest(),
        Colours(),
        images.__getitem__,
        query_embedding="text",
    )
    # the query text says "red"; the question's image is green: averaged, the green image ranks first
    assert [h.doc_id for h in text.first_stage(["red"], ("image",), [["q"]])[0]] == ["image:r", "image:g"]
    assert [h.doc_id for h in average.first_stage(["red"], ("image",), [["q"]])[0]] == ["image:g", "image:r"]
    assert [h.doc_id for h in average.first_stage(["red"], ("image",), [[]])[0]] == ["image:r", "image:g"]  # no image
    assert "image documents searched with the mean of the query-text and question-image embeddings" in average.notes
    assert "image documents searched with the query text alone (query_embedding: text)" in text.notes


def test_text_and_image_rankings_fuse_by_reciprocal_rank(tmp_path):
    corpus = RagCorpus(
        corpus_table(with_images=True), tmp_path, Words(), Shortest(), Colours(), IMAGES.__getitem__, fusion="rrf"
    )
    [ranked] = corpus.rank(["red tower"])
    # text (reranked): d2, d3, d1; images: image:r, image:g. Equal ranks tie on score; ties go by doc id.
    assert [h.doc_id for h in ranked] == ["d2", "image:r", "d3", "image:g", "d1"]
    assert ranked[0] == Hit("d2", "text", 1 / (RRF_K + 1))
    assert corpus.components["image_retriever"] == "stub-colours"


def test_a_cutoff_takes_the_fixed_ks_place(tmp_path):
    same = Shortest()
    same.name = "bi-encoder:stub-words"  # no reranking: the scores are the first stage's cosines
    corpus = RagCorpus(corpus_table(), tmp_path, Words(), same)
    assert corpus.score_scale() == "cosine"
    query = ["tall tower in paris"]
    [ranked] = corpus.rank(query)
    assert retrieve(query, corpus, 5, TopK(k=1)) == retrieve(query, corpus, 1) == [[ranked[0]]]
    assert retrieve(query, corpus, 5, MadCutoff(tau=0.999)) == [[]]  # no cosine reaches the floor
    assert retrieve(query, corpus, 5, MadCutoff(tau=0.0, max_keep=1)) == [[ranked[0]]]
    fused = RagCorpus(
        corpus_table(with_images=True), tmp_path, Words(), Shortest(), Colours(), IMAGES.__getitem__, fusion="rrf"
    )
    assert fused.score_scale() is None
    with pytest.raises(MmcurateError, match="no score scale"):
        retrieve(query, fused, 5, MadCutoff())


class Overlap:
    """Reranker stub: the share of a passage's words that are query words."""

    name = "stub-overlap"

    def scores(self, query, passages):
        wanted = set(query.split())
        return [
            sum(w in wanted for w in words) / len(words)
            for words in (p.lower().replace(".", " ").replace(",", " ").split() for p in passages)
        ]


def captioned_table() -> pa.Table:
    """The three text documents, two image documents with source captions and one without."""
    captions = {"image:r": "A red tower", "image:g": "A green banana"}
    rows = [{**r, "title": captions.get(r["doc_id"], r["title"])} for r in corpus_table(with_images=True).to_pylist()]
    rows.append({"doc_id": "image:b", "modality": "image", "text": None, "image": "b", "title": None})
    return pa.Table.from_pylist(rows, schema=KNOWLEDGE_BASE)


def split(hits):
    return sum(h.modality == "text" for h in hits), sum(h.modality == "image" for h in hits)


def test_one_reranking_stage_scores_text_and_image_documents_on_one_scale(tmp_path):
    # seed 004, 5.1: the retriever's top 100, from which one multimodal reranker selects the top K
    images = {**IMAGES, "b": b"red banana"}
    corpus = RagCorpus(
        captioned_table(), tmp_path, Words(), Overlap(), Colours(), images.__getitem__, query_embedding="text"
    )
    queries = ["red green", "london tower", "tall paris"]
    shown = retrieve(queries, corpus, 2)
    assert [split(hits) for hits in shown] == [(0, 2), (1, 1), (2, 0)]  # the split follows the scores, per query
    assert shown[1] == [Hit("d2", "text", 2 / 3), Hit("image:r", "image", 1 / 3)]  # the reranker's scores, one scale
    # image:b has no caption: the reranker has nothing to read of it, so no ranking shows it, and the notes say so
    assert all(h.doc_id != "image:b" for ranking in corpus.rank(queries) for h in ranking)
    assert {h.doc_id for h in corpus.rank(["red green"], ("image",))[0]} == {"image:r", "image:g"}
    assert corpus.notes[-1].startswith("fusion: rerank: one reranking stage (stub-overlap) scores")
    assert corpus.notes[-1].endswith(
        "1 of 3 image documents carry no caption, so the reranker cannot score them and no ranking shows them"
    )
    assert corpus.score_scale() == "cosine"  # one scale: a cutoff can cut MultiRAG's ranking too
    assert [split(hits) for hits in retrieve(["red green"], corpus, 5, MadCutoff(tau=0.3))] == [(0, 2)]
    # the other reading: reciprocal-rank fusion gives every top 2 the same split (one of each)
    rrf = RagCorpus(
        captioned_table(),
        tmp_path,
        Words(),
        Overlap(),
        Colours(),
        images.__getitem__,
        query_embedding="text",
        fusion="rrf",
    )
    assert [split(hits) for hits in retrieve(queries, rrf, 2)] == [(1, 1)] * 3


def test_the_bi_encoder_of_the_retrieval_encoder_ranks_text_and_captions_by_their_cosines(tmp_path):
    same = Shortest()
    same.name = "bi-encoder:stub-words"  # MiniLM for both, the offline default: its scores are the first stage's
    corpus = RagCorpus(captioned_table(), tmp_path, Words(), same)
    text, image = corpus.first_stage(["red tower"], ("text",))[0], corpus.first_stage(["red tower"], ("image",))[0]
    [ranked] = corpus.rank(["red tower"])
    assert ranked == sorted(text + image, key=lambda h: -h.score)
    assert split(ranked[:2]) == (1, 1) and ranked[0].doc_id == "image:r"
