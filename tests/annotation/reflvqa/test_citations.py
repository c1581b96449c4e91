"""Stage 4: retrieval + entailment filtering of citations; release tables and statistics."""

from __future__ import annotations

import hashlib
import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mmcurate.annotation.reflvqa.citations import (
    CHECK_CUTOFF,
    CHECK_FLAG,
    CHECK_IMAGE,
    CHECK_TEXT,
    CiteDocuments,
    knowledge_base,
    post_titles,
)
from mmcurate.core.errors import MmcurateError
from mmcurate.core.ids import sha256_bytes
from mmcurate.core.schema import SENTENCE
from mmcurate.judging.entailment import entailment_judge
from mmcurate.releases.reflvqa.tables import reflvqa_statistics, reflvqa_tables
from mmcurate.retrieval.kb import image_doc_id

DOCS = [
    {
        "doc_id": "eiffel",
        "title": "Eiffel Tower",
        "text": "The Eiffel Tower in Paris was completed in 1889 for the World's Fair.",
    },
    {
        "doc_id": "bridge",
        "title": "Tower Bridge",
        "text": "Tower Bridge crosses the Thames in London and opened in 1894.",
    },
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
    dim = len(COLOURS)

    def __init__(self, shas):
        self.shas = shas  # sha -> colour name

    def encode_text(self, texts):
        return np.array([[float(c in t.lower()) + 1e-3 for c in self.COLOURS] for t in texts], dtype=np.float32)

    def encode_images(self, images):
        return np.array(
            [[float(self.shas[sha256_bytes(b)] == c) + 1e-3 for c in self.COLOURS] for b in images], dtype=np.float32
        )


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "kb.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    return str(path)


def sentence(index, text, fact_checkable):
    return {
        "index": index,
        "text": text,
        "fact_checkable": fact_checkable,
        "text_citations": [],
        "image_citations": [],
        "flagged": False,
    }


@pytest.fixture
def labelled(make_samples):
    """The fact-checkable stage's kept output for one pair."""
    table = make_samples([("p0", "c0", "Which towers are these?", " ".join(s for s, _ in SENTENCES), ["cd" * 32])])
    column = [[sentence(i, s, fc) for i, (s, fc) in enumerate(SENTENCES)]]
    return table.append_column("sentences", pa.array(column, type=pa.list_(SENTENCE)))


def run(labelled, corpus, stage_ctx, pool=None, images=(), **kw):
    stage = CiteDocuments([corpus], list(images), text_encoder=BagOfWords(), **{"top_text": 2, **kw})
    return stage.run(labelled, stage_ctx(pool))


def test_lexical_entailment_filters_citations(labelled, corpus, tmp_path, stage_ctx):
    result = run(labelled, corpus, stage_ctx, text_entailment="lexical")
    sentences = result.kept["sentences"].to_pylist()[0]
    assert [s["text_citations"] for s in sentences] == [["eiffel"], [], ["bridge"], []]
    assert [s["flagged"] for s in sentences] == [False, False, False, True]
    assert all(s["image_citations"] == [] for s in sentences)
    judged = [d for d in result.decisions if d.check == CHECK_TEXT]
    assert len(judged) == 3 * 2  # 3 fact-checkable sentences x top 2 documents
    assert {d.model for d in judged} == {"lexical-overlap-v1"}
    assert {(d.detail["sentence"], d.context_id) for d in judged if d.verdict == "entail"} == {
        (0, "eiffel"),
        (2, "bridge"),
    }
    assert all(d.verdict in ("entail", "reject") and isinstance(d.detail["score"], float) for d in judged)
    flags = [d for d in result.decisions if d.check == CHECK_FLAG]
    assert [(d.context_id, d.verdict) for d in flags] == [("s3", "flagged")]
    assert result.extra["image_skipped"] == "no image entailment model configured"
    assert result.counts["flagged"] == 1 and result.counts["text_citations"] == 2
    # the index is cached on disk: a second run loads it instead of embedding the corpus again
    # one index built and cached (beside it the hidden lock its build held: retrieval.resumable_index)
    assert len([p for p in (tmp_path / "indexes").iterdir() if not p.name.startswith(".")]) == 1
    again = run(labelled, corpus, stage_ctx, text_entailment="lexical")
    assert again.kept.equals(result.kept)


def test_embedding_the_corpus_prints_progress_as_the_evaluation_does(labelled, corpus, stage_ctx, capsys):
    """Issue 42 item 19: ``run reflvqa`` was silent for minutes while the citation stage embedded
    the text corpus; it prints the evaluation's progress lines (``resumable_index``), once, on
    stderr (stdout holds a command's result alone)."""
    run(labelled, corpus, stage_ctx, text_entailment="lexical")
    printed = capsys.readouterr()
    lines = printed.err.splitlines()
    assert printed.out == ""
    assert any(
        re.fullmatch(rf"reflvqa-text: embedding: {len(DOCS)}/{len(DOCS)} rows \(100%\), .* rows/s, ETA .*", line)
        for line in lines
    ), lines
    assert lines[-1].startswith("reflvqa-text: index ready (")
    run(labelled, corpus, stage_ctx, text_entailment="lexical")
    assert capsys.readouterr() == ("", "")  # the index is on disk: nothing embedded, nothing said


def test_llm_entailment_with_scripted_yes_no(labelled, corpus, make_pool, stage_ctx):
    judge = (
        [
            {"when_all": ["Document: Eiffel Tower.", "Statement: The Eiffel Tower was completed"], "answer": "Yes"},
            {
                "when_all": ["Document: Tower Bridge crosses", "Statement: Tower Bridge", "could not be read"],
                "answer": "no",
            },
            {"when_all": ["Document: Tower Bridge crosses", "Statement: Tower Bridge"], "answer": "I believe so"},
            {"when_all": ["Document: Paris.", "Statement: The Eiffel"], "answer": "perhaps"},
        ],
        "no",
        False,
    )
    pool = make_pool({"judge": judge})
    result = run(labelled, corpus, stage_ctx, pool, text_entailment="llm:judge")
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
    assert result.extra["text_judge"] == "llm:judge"


def test_image_citations_with_cross_modal_encoder_and_vlm(labelled, corpus, make_pool, store, png, stage_ctx):
    colours = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255)}
    shas = {store.put(png(rgb)): name for name, rgb in colours.items()}
    red = next(s for s, c in shas.items() if c == "red")
    table = labelled.drop_columns(["sentences"]).append_column(
        "sentences",
        pa.array(
            [[sentence(0, "The red bus is a Routemaster.", True), sentence(1, "The blue door is closed.", True)]],
            type=pa.list_(SENTENCE),
        ),
    )
    vlm = ([{"when_all": ["Statement: The red bus"], "answer": "yes"}], "no", True)
    pool = make_pool({"vlm": vlm})
    result = run(
        table,
        corpus,
        stage_ctx,
        pool,
        shas,
        text_entailment="lexical",
        cross_modal=ColourClip(shas),
        top_images=1,
        image_entailment="vlm",
    )
    sentences = result.kept["sentences"].to_pylist()[0]
    assert sentences[0]["image_citations"] == [image_doc_id(red)]
    assert sentences[1]["image_citations"] == [] and sentences[1]["flagged"]
    images = [d for d in result.decisions if d.check == CHECK_IMAGE]
    assert [(d.context_id, d.verdict, d.model) for d in images][0] == (image_doc_id(red), "entail", "vlm")
    assert len(images) == 2 and images[1].verdict == "reject"
    assert result.extra["image_skipped"] is None and result.extra["image_judge"] == "vlm"
    kb = knowledge_base([corpus], None, list(shas))
    assert sorted(kb.filter(pc.equal(kb["modality"], "image"))["image"].to_pylist()) == sorted(shas)
    # without a cross-modal encoder the image step is skipped and said so, never faked
    skipped = run(table, corpus, stage_ctx, pool, shas, text_entailment="lexical", image_entailment="vlm")
    assert "cross-modal" in skipped.extra["image_skipped"]
    assert not any(d.check == CHECK_IMAGE for d in skipped.decisions)


def test_release_tables_schema_and_statistics(labelled, corpus, stage_ctx):
    result = run(labelled, corpus, stage_ctx, text_entailment="lexical")
    tables = reflvqa_tables(result.kept, knowledge_base([corpus], None, []))
    sentence = pa.struct(
        [
            pa.field("index", pa.int32(), nullable=False),
            pa.field("text", pa.string(), nullable=False),
            pa.field("fact_checkable", pa.bool_()),
            pa.field("text_citations", pa.list_(pa.string()), nullable=False),
            pa.field("image_citations", pa.list_(pa.string()), nullable=False),
            pa.field("flagged", pa.bool_(), nullable=False),
        ]
    )
    assert tables["qa"].schema.names == ["sample_id", "source_id", "question", "images", "answer", "sentences", "meta"]
    assert [f.type for f in tables["qa"].schema] == [
        pa.string(),
        pa.string(),
        pa.string(),
        pa.list_(pa.string()),
        pa.string(),
        pa.list_(sentence),
        pa.string(),
    ]
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
    judge = entailment_judge("lexical:0.6")
    assert judge.threshold == 0.6 and judge.name == "lexical-overlap-v1@0.6"
    assert entailment_judge("lexical").name == "lexical-overlap-v1"
    with pytest.raises(MmcurateError, match="threshold must be a number"):
        entailment_judge("lexical:most")


def test_mad_cutoff_before_entailment(labelled, corpus, stage_ctx):
    """Over the whole 4-document corpus, MAD cuts the documents scoring below 0.1 (the floor
    wins: median - 1.5 MAD is lower); only the kept ones are judged."""
    result = run(labelled, corpus, stage_ctx, text_entailment="lexical", cutoff="mad", top_text=4)
    cuts = {d.context_id: d for d in result.decisions if d.check == CHECK_CUTOFF}
    assert sorted(cuts) == ["s0", "s2", "s3"]  # fact-checkable sentences only
    assert {k: (d.verdict, d.detail["kept_ids"], d.detail["cut_ids"]) for k, d in cuts.items()} == {
        "s0": ("cut", ["eiffel", "bridge"], ["cat", "paris"]),
        "s2": ("cut", ["bridge", "eiffel", "cat"], ["paris"]),
        "s3": ("cut", ["cat", "bridge"], ["paris", "eiffel"]),
    }
    assert all(
        d.detail["cutoff"] == "mad" and d.detail["theta"] == 0.1 and d.detail["scale"] == "cosine"
        for d in cuts.values()
    )
    judged = [(d.detail["sentence"], d.context_id) for d in result.decisions if d.check == CHECK_TEXT]
    assert len(judged) == 7 and (0, "cat") not in judged
    assert {k: result.counts[k] for k in ("cutoff_retrieved", "cutoff_kept", "cutoff_cut")} == {
        "cutoff_retrieved": 12,
        "cutoff_kept": 7,
        "cutoff_cut": 5,
    }
    assert [s["text_citations"] for s in result.kept["sentences"].to_pylist()[0]] == [["eiffel"], [], ["bridge"], []]
    assert result.kept["retrieved_text"].to_pylist()[0] == [
        {"index": 0, "doc_ids": ["eiffel", "bridge"]},
        {"index": 2, "doc_ids": ["bridge", "eiffel", "cat"]},
        {"index": 3, "doc_ids": ["cat", "bridge"]},
    ]
    assert result.extra["text_cutoff"] == "mad" and result.components["text_cutoff"] == "mad"
    fixed = run(labelled, corpus, stage_ctx, text_entailment="lexical", cutoff="top_k:1", top_text=4)
    assert fixed.counts["cutoff_kept"] == 3 and fixed.counts["cutoff_cut"] == 9
    # without a cutoff nothing is recorded about one
    plain = run(labelled, corpus, stage_ctx, text_entailment="lexical")
    assert not any(d.check == CHECK_CUTOFF for d in plain.decisions) and "cutoff_kept" not in plain.counts


def test_a_posts_images_carry_its_title_as_their_caption(corpus):
    """Issue 43 item 3: the image documents of the posts' own images are titled with the first
    post showing them, which the evaluation's caption stand-ins (retrieval and reranking) read."""
    candidates = pa.table(
        {
            "question": ["What breed is this cat?", "Which rocket is this?", "Same cat again?"],
            "images": [["aa", "bb"], ["cc"], ["aa"]],
        }
    )
    titles = post_titles(candidates)
    assert titles == {"aa": "What breed is this cat?", "bb": "What breed is this cat?", "cc": "Which rocket is this?"}
    kb = knowledge_base([corpus], None, ["aa", "cc", "dd"], titles)
    images = kb.filter(pc.equal(kb["modality"], "image")).select(["image", "title"]).to_pylist()
    assert images == [
        {"image": "aa", "title": "What breed is this cat?"},
        {"image": "cc", "title": "Which rocket is this?"},
        {"image": "dd", "title": None},
    ]
