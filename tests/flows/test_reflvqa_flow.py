"""The RefLVQA flow end to end on the bundled Reddit dumps, with a scripted text-only
inspector (it never knows the answer, so the lexical grader finds every image necessary):
a valid, non-empty release that says what it skipped; a rerun that calls no model; and the
flow honouring the configured task runner and shard size (a Dask LocalCluster, shards of two
samples) with the same release content as the thread runner."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest

from mmcurate.core.config import TaskRunnerConfig
from mmcurate.core.storage import MARKER, Location
from mmcurate.models.cache import ResponseCache
from mmcurate.releases.reader import open_release
from mmcurate.releases.verify import verify_release
from mmcurate.tasks.runners import make_task_runner
from tests.fixtures.builders.reddit import QUESTIONS
from tests.flows import flowkit
from tests.flows.release_fingerprint import content_fingerprint

pytestmark = pytest.mark.slow
SHARD = 2


def config(home: Path, fixtures: Path, runner: str, releases: str, workdir: str = "work") -> Path:
    # asked for one search query, the inspector writes the question itself (so each question has its
    # own query); everything else it is not sure of
    (home / "inspector.jsonl").write_text(
        "".join(
            json.dumps({"when_all": ["Search query:", title], "answer": title}) + "\n" for _, _, title, *_ in QUESTIONS
        )
    )
    inspector = {
        "backend": "scripted",
        "script": "inspector.jsonl",
        "default": "I am not sure.",
        "revision": "inspector-1",
    }
    return flowkit.reflvqa_config(
        home,
        fixtures,
        {"inspector": inspector},
        name=f"{runner}.yaml",
        releases_root=releases,
        workdir=workdir,
        task_runner={"kind": runner, "workers": 2, "shard_size": SHARD},
        evaluation={"reflvqa": {"top_k": 3, "doc_chars": 300, "answer_max_tokens": 40, "evaluators": "lexical"}},
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory, fixtures_root, prefect_harness):
    from mmcurate.flows.reflvqa.curate import reflvqa

    home = tmp_path_factory.mktemp("reflvqa")
    path = config(home, fixtures_root, "threads", "releases")
    return home, path, Path(reflvqa(config=str(path)))


def test_flow_writes_a_valid_release_that_says_what_it_skipped(run):
    home, _, path = run
    assert path == home / "releases" / "reflvqa" / "1.0.0"
    assert verify_release(path).ok
    release = open_release(path)
    notes = " ".join(release.manifest.notes)
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
    table1 = {row["statistic"] for row in release.manifest.statistics["table1"]}
    assert {"pairs", "unique_questions", "unique_images", "answer_words_mean"} <= table1


def test_rerun_makes_no_model_call(run):
    from mmcurate.flows.reflvqa.curate import reflvqa

    home, path, release = run
    with ResponseCache.open(f"sqlite:///{home / 'work' / 'responses.sqlite'}") as cache:
        before = cache.count()
        assert Path(reflvqa(config=str(path))) == release
        assert cache.count() == before


def test_evaluation_runs_the_grid_over_the_release_and_writes_table_5(run):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from mmcurate.flows.evaluate import evaluate_release

    home, path, release_path = run
    out = Path(evaluate_release(release=str(release_path), model="inspector", config=str(path)))
    assert out == home / "work" / "evaluations" / "reflvqa-1.0.0" / "inspector"
    qa = open_release(release_path).frame("qa")
    answers = pl.read_parquet(out / "answers.parquet")
    for setting in ("text", "image", "multi", "two-step"):  # the default grid: every setting, N = 1
        mine = answers.filter(pl.col("setting") == setting)
        assert sorted(mine["sample_id"].to_list()) == sorted(qa["sample_id"].to_list())  # one row per QA pair
        assert set(mine["n_queries"].to_list()) == {1}
    assert set(answers["status"].to_list()) <= {"answered", "failed", "unreadable"}
    images_in_multi = {}
    for row in answers.to_dicts():
        shown = [d["doc_id"] for d in row["retrieved"]]
        modalities = [d["modality"] for d in row["retrieved"]]
        assert row["queries"] == [qa.filter(pl.col("sample_id") == row["sample_id"])["question"][0]]
        # image documents carry their post's title as caption: every setting finds K documents
        assert len(shown) == 3 and len(set(shown)) == len(shown)
        if row["setting"] in ("text", "image"):
            assert set(modalities) == {row["setting"]}
        if row["setting"] == "multi":
            images_in_multi[row["sample_id"]] = modalities.count("image")
        assert {d for s in row["sentences"] for d in s["citations"]} <= set(shown)
    # one reranking stage over both modalities (seed 004, 5.1): image documents among those shown, the
    # text/image split following the scores, so it differs between questions
    assert max(images_in_multi.values()) >= 1 and len(set(images_in_multi.values())) > 1
    grades = pl.read_parquet(out / "grades.parquet")
    sentence_grades = grades.filter(pl.col("metric") != "relevance")["grade"].to_list()
    assert set(sentence_grades) <= {0.0, 0.5, 1.0}
    assert set(grades.filter(pl.col("metric") == "relevance")["grade"].to_list()) <= {float(n) for n in range(1, 8)}
    assert set(grades["evaluator"].to_list()) <= {"lexical-grader-v1", "rule:no-citation"}
    retrieval = {r["searched"]: r for r in pl.read_parquet(out / "retrieval_metrics.parquet").to_dicts()}
    assert set(retrieval) == {"text", "image", "text+image"}
    hits = [retrieval["text"][f"hit_at_{k}"] for k in range(1, 11)]
    assert hits == sorted(hits) and retrieval["text"]["scored"] >= 1  # the fixture answers cite the fixture KB
    table = (out / "table.md").read_text()
    assert "token-overlap stand-in, not an evaluator model" in table.splitlines()[0]
    assert "| Model | Grd Mean | Grd @1.0 | Grd @0.5 |" in table
    assert "| Documents searched | Settings | NDCG@10 | Recall@100 | Hit@1 |" in table
    for row in ("TextRAG", "ImageRAG", "MultiRAG", "Two-step MultiRAG"):
        assert f"| inspector + {row} |" in table
    assert "a stand-in finds them by the caption their source gives them" in table  # image retrieval, said so
    assert "fusion: rerank (one reranking stage scores text and image candidates on one scale" in table
    # seed 004, C.2's generation settings, recorded and named with what the scripted model cannot apply
    assert (
        "Decoding: temperature 0.7, top-p 0.95, repetition penalty 1.0, longest image side (px) 512, from "
        "evaluation.reflvqa.decoding (seed 004, C.2" in table
    )
    assert "Answers: at most 40 new tokens (evaluation.reflvqa.answer_max_tokens; seed 004, C.2: 2,048)." in table
    decoding = json.loads((out / "release.json").read_text())["decoding"]
    assert {k: decoding[k] for k in ("reading", "temperature", "top_p", "image_max_side", "max_new_tokens")} == {
        "reading": "evaluation",
        "temperature": 0.7,
        "top_p": 0.95,
        "image_max_side": 512,
        "max_new_tokens": 40,
    }
    assert set(decoding["not_applied"]) == {"temperature", "top_p", "repetition_penalty", "image_max_side"}
    assert "readings: the model writes N search queries" in table and "two_step_documents: shared" in table
    # the paper's readings by default, each named (issue 32 items 6, 8, 9)
    assert "score_average: per_answer" in table and "duplicates: keep" in table
    assert f"subset: all ({len(qa)} QA pairs): the release has no imported verification labels" in table
    assert "| answers requested |" in table and "| questions excluded at query step n1 |" in table
    assert (out / "hit_at_k.png").stat().st_size > 1000
    wanted = {"evaluation-reflvqa", "reflvqa-evaluation-plan", "reflvqa-evaluation-plan-vs-spent"}
    with get_client(sync_client=True) as client:  # by key: the session's API holds every test's artifacts
        found = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=sorted(wanted))))
    assert {a.key for a in found} == wanted


def test_on_a_cluster_sharing_only_s3_the_shards_give_the_same_release(
    run, fixtures_root, s3_bucket, monkeypatch, capsys
):
    """The configured task runner and shard size, on a cluster as issue 46 runs one: two Dask
    workers that cannot see the flow's folders (tests/cluster.py), the workdir (ingest parts,
    images, ledger parts), the releases and the response cache in the local S3 server. The
    release's data files are the thread runner's, byte for byte, and ``verify`` passes on the
    S3 copy."""
    from mmcurate.flows.reflvqa.curate import reflvqa
    from tests.cluster import isolated_cluster
    from tests.releases.cli_helpers import run_cli

    home, _, threads = run
    path = config(home, fixtures_root, "dask", f"{s3_bucket}/releases", workdir=f"{s3_bucket}/work")
    flow_side = home / "flow-scratch"  # the flow's copies of the workdir and releases: no worker sees them
    monkeypatch.setenv("MMCURATE_SCRATCH", str(flow_side))
    with isolated_cluster(flow_side) as cluster:
        runner = make_task_runner(TaskRunnerConfig(kind="dask", address=cluster.scheduler_address, shard_size=SHARD))
        state = reflvqa.with_options(task_runner=runner)(config=str(path), return_state=True)
        on_dask = Path(state.result())
    assert on_dask.is_relative_to(flow_side) and content_fingerprint(on_dask) == content_fingerprint(threads)
    stored = Location.parse(f"{s3_bucket}/releases/reflvqa/1.0.0")
    names = sorted(json.loads((stored / MARKER).read_bytes())["files"])
    data = [name for name in names if name.startswith("data/")]
    assert data and data == sorted(p.relative_to(threads).as_posix() for p in (threads / "data").rglob("*.parquet"))
    assert all((stored / name).read_bytes() == (threads / name).read_bytes() for name in data)
    code, out, err = run_cli(capsys, monkeypatch, "verify", stored.url)
    assert code == 0 and out.strip().endswith("verified"), (out, err)
    funnel = {
        row["stage"]: row["remaining"]
        for row in json.loads((on_dask / "manifest.json").read_text())["statistics"]["funnel"]
    }
    candidates = funnel["candidate QA pairs (ingest)"]
    wanted = {
        "relevance-": 1,  # compares posts across the table: one shard
        "necessity-": math.ceil(candidates / SHARD),
        "factcheck-": math.ceil(funnel["necessity"] / SHARD),
    }
    assert wanted["necessity-"] > 1 and flowkit.shard_runs(state.state_details.flow_run_id, wanted) == wanted


def test_a_second_evaluation_adds_its_settings_to_the_folder(run, tmp_path):
    """Issue 31 item 2: ``--setting image --setting two-step --queries 1 --queries 2`` then
    ``--setting text``: the folder holds both runs' cells and its tables are rebuilt from all of them."""
    from mmcurate.flows.evaluate import evaluate_release

    home, path, release_path = run
    out = tmp_path / "eval"
    first = {"settings": ["image", "two-step"], "queries": [1, 2]}
    evaluate_release(release=str(release_path), model="inspector", config=str(path), out=str(out), options=first)
    before = pl.read_parquet(out / "answers.parquet")
    grades_before = pl.read_parquet(out / "grades.parquet")
    evaluate_release(
        release=str(release_path), model="inspector", config=str(path), out=str(out), options={"settings": ["text"]}
    )
    answers = pl.read_parquet(out / "answers.parquet")
    questions = open_release(release_path).frame("qa").height
    cells = sorted(answers.select(["setting", "n_queries"]).unique().rows())
    assert cells == [("image", 1), ("image", 2), ("text", 1), ("two-step", 1), ("two-step", 2)]
    assert answers.height == 5 * questions
    assert (
        answers.filter(pl.col("setting") != "text")
        .sort(["setting", "n_queries", "sample_id"])
        .equals(before.sort(["setting", "n_queries", "sample_id"]))
    )  # the first run's rows, untouched
    grades = pl.read_parquet(out / "grades.parquet")
    assert grades.filter(pl.col("setting") != "text").height == grades_before.height
    metrics = pl.read_parquet(out / "metrics.parquet")
    assert metrics.height == 5  # Table 5 rebuilt from every cell
    table = (out / "table.md").read_text()
    for row in ("TextRAG", "ImageRAG", "Two-step MultiRAG", "Two-step MultiRAG (N = 2)"):
        assert f"| inspector + {row} |" in table
    assert "TextRAG, ImageRAG, Two-step MultiRAG with N = 1, 2 search queries" in table.splitlines()[0]
    assert "Also shown: 4 cells of earlier runs" in table
    counts = dict(
        line.strip("| ").split(" | ")
        for line in table.split("## Counts")[1].split("##")[0].splitlines()
        if line.startswith("| ") and "count" not in line
    )
    requested = answers.filter(pl.col("queries").list.len() > 0)  # N = 2: one scripted line is no 2 queries
    assert counts["answers requested"] == str(requested.height) and set(requested["setting"]) == {
        "text",
        "image",
        "two-step",
    }
    assert set(pl.read_parquet(out / "retrieval.parquet")["searched"].to_list()) == {"text", "image", "text+image"}
