"""The RefLVQA flow end to end with the embedded model on the bundled Reddit dumps."""
from __future__ import annotations

import textwrap
from pathlib import Path

import polars as pl
import pytest

from mmcurate.gating.cache import ResponseCache
from mmcurate.releases.reader import open_release
from mmcurate.releases.verify import verify_release

pytestmark = pytest.mark.slow

CONFIG = """
workdir: work
releases_root: releases
models:
  smollm2: {{backend: embedded, gguf: smollm2, revision: q4_1, max_tokens: 24, concurrency: 2}}
reflvqa:
  source: {{name: reddit, root: {fx}/reddit, limit: 4}}
  inspectors: [smollm2]
  evaluator: lexical
  max_right_inspectors: 0
  factcheck_model: heuristic
  text_corpus: {fx}/kb/kb.jsonl
  text_entailment: "lexical:0.5"
  version: 1.0.0
evaluation:
  reflvqa: {{top_k: 3, doc_chars: 300, answer_max_tokens: 40, evaluators: lexical}}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory, fixtures_root, prefect_harness):
    from mmcurate.flows.reflvqa import reflvqa

    home = tmp_path_factory.mktemp("reflvqa")
    config = home / "config.yaml"
    config.write_text(textwrap.dedent(CONFIG.format(fx=fixtures_root)))
    return home, config, Path(reflvqa(config=str(config)))


def test_flow_writes_a_valid_release_that_says_what_it_skipped(run):
    home, _, path = run
    assert path == home / "releases" / "reflvqa" / "1.0.0"
    assert verify_release(path).ok
    release = open_release(path)
    notes = " ".join(release.manifest["notes"])
    assert "relevance" in notes and "cross-modal" in notes  # no CLIP offline: skipped, said so
    assert "image citations" in notes
    ledger = pl.from_arrow(release.ledger)
    assert {"relevance", "necessity"} <= set(ledger["stage"].to_list())
    assert ledger.filter(pl.col("stage") == "relevance")["verdict"].unique().to_list() == ["skipped"]
    qa = release.frame("qa")
    documents = set(release.frame("documents")["doc_id"].to_list())
    assert qa.height > 0 and documents  # the fixture answers cite the fixture encyclopedia
    for sentences in qa["sentences"].to_list():
        for sentence in sentences:
            assert set(sentence["text_citations"]) <= documents
            if sentence["fact_checkable"]:
                assert sentence["text_citations"] or sentence["flagged"]
    kb = release.frame("knowledge_base")
    assert kb.filter(kb["modality"] == "text").height == 60  # the whole fixture corpus ships for RAG
    table1 = {row["statistic"] for row in release.manifest["statistics"]["table1"]}
    assert {"pairs", "unique_questions", "unique_images", "answer_words_mean"} <= table1


def test_rerun_makes_no_model_call(run):
    from mmcurate.flows.reflvqa import reflvqa

    home, config, path = run
    cache = ResponseCache.open(f"sqlite:///{home / 'work' / 'responses.sqlite'}")
    before = cache.count()
    assert Path(reflvqa(config=str(config))) == path
    assert cache.count() == before


def test_evaluation_runs_rag_over_the_release_and_writes_table_5(run):
    """The embedded model answers differently across machines: invariants only."""
    from prefect.client.orchestration import get_client

    from mmcurate.flows.evaluate import evaluate_release

    home, config, path = run
    out = Path(evaluate_release(release=str(path), model="smollm2", config=str(config)))
    assert out == home / "work" / "evaluations" / "reflvqa-1.0.0" / "smollm2"
    release = open_release(path)
    qa = release.frame("qa")
    answers = pl.read_parquet(out / "answers.parquet")
    assert sorted(answers["sample_id"].to_list()) == sorted(qa["sample_id"].to_list())  # one row per QA pair
    assert set(answers["status"].to_list()) <= {"answered", "failed", "unreadable"}
    for row in answers.to_dicts():
        shown = [d["doc_id"] for d in row["retrieved"]]
        assert len(shown) == 3 and len(set(shown)) == 3
        assert {d for s in row["sentences"] for d in s["citations"]} <= set(shown)
    grades = pl.read_parquet(out / "grades.parquet")
    sentence_grades = grades.filter(pl.col("metric") != "relevance")["grade"].to_list()
    assert set(sentence_grades) <= {0.0, 0.5, 1.0}
    assert set(grades.filter(pl.col("metric") == "relevance")["grade"].to_list()) <= {float(n) for n in range(1, 8)}
    assert set(grades["evaluator"].to_list()) <= {"lexical-grader-v1", "rule:no-citation"}
    retrieval = pl.read_parquet(out / "retrieval_metrics.parquet").to_dicts()[0]
    hits = [retrieval[f"hit_at_{k}"] for k in range(1, 11)]
    assert hits == sorted(hits) and retrieval["scored"] >= 1  # the fixture answers cite the fixture KB
    table = (out / "table.md").read_text()
    assert "token-overlap stand-in, not an evaluator model" in table.splitlines()[0]
    assert "| Model | Grd Mean | Grd @1.0 | Grd @0.5 |" in table and "| NDCG@10 | Recall@100 | Hit@1 |" in table
    assert (out / "hit_at_k.png").stat().st_size > 1000
    with get_client(sync_client=True) as client:
        assert "evaluation-reflvqa" in {a.key for a in client.read_artifacts()}
