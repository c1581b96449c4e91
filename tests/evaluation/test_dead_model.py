"""Failed answer calls in an evaluation: the answering tasks record them (grade FAILED, status
failed) and count them; one policy (``evaluation.failures``) decides for every benchmark what
may be written: a complete run, or an incomplete one the user allowed; never a run in which
every call failed."""

from __future__ import annotations

import pyarrow as pa
import pytest

from mmcurate.core.config import ModelSpec, Settings
from mmcurate.evaluation.failures import EvaluationError, check_failures
from mmcurate.releases.reflvqa.tables import KNOWLEDGE_BASE
from mmcurate.tasks.evaluate import answer_reflvqa, answer_scenarios


def settings(tmp_path, default):
    script = tmp_path / "dead.jsonl"
    script.write_text('{"when_all": ["Q-ALIVE"], "answer": "Paris"}\n')
    return Settings(
        workdir=tmp_path / "work",
        models={"dead": ModelSpec(name="dead", backend="scripted", script=script, default=default)},
    )


def test_the_policy_for_every_benchmark():
    assert check_failures("m", 0, 4, None) is None
    with pytest.raises(
        EvaluationError,
        match=r"^model 'm' failed 1 of 4 calls \(first error: boom\); nothing was "
        r"summarised; .*--allow-incomplete$",
    ):
        check_failures("m", 1, 4, "boom")
    assert check_failures("m", 1, 4, "boom", allow_incomplete=True) == (
        "Incomplete run: model 'm' failed 1 of 4 calls (first error: boom)."
    )
    with pytest.raises(
        EvaluationError,
        match=r"^every answer call failed: model 'm' failed 4 of 4 calls \(first "
        r"error: boom\); nothing written$",
    ):
        check_failures("m", 4, 4, "boom", allow_incomplete=True)


def test_deflectionbench_failures_are_recorded_and_counted(tmp_path, make):
    alive = make.table([make.sample("a", "Q-ALIVE?", ["Paris"]), make.sample("b", "Q-B?", ["Paris"])])
    results, calls = answer_scenarios.fn(alive, settings(tmp_path, None), "dead", ["oracle"], [2], ["moderate"], 0, "r")
    assert sorted(results["grade"].to_pylist()) == ["CORRECT", "FAILED"]
    assert sum(r["failures"] for r in calls) == 1


def test_reflvqa_failures_are_recorded_and_counted(tmp_path):
    qa = [
        {
            "sample_id": "q",
            "question": "Q-DEAD?",
            "images": [],
            "answer": "x",
            "sentences": [
                {
                    "index": 0,
                    "text": "x",
                    "fact_checkable": True,
                    "text_citations": ["d"],
                    "image_citations": [],
                    "flagged": False,
                }
            ],
        }
    ]
    kb = pa.Table.from_pylist(
        [{"doc_id": "d", "modality": "text", "text": "Q-DEAD answer", "image": None, "title": "D"}],
        schema=KNOWLEDGE_BASE,
    )
    run, _, _, calls = answer_reflvqa.fn(qa, kb, settings(tmp_path, None), "dead", "r", ["text", "two-step"])
    assert run.answers["status"].to_pylist() == ["failed", "failed"]
    # the question is excluded at the query step: no answer was asked for (issue 31 item 12)
    assert (run.counts["queries_failed_n1"], run.counts["questions_excluded_at_query_step_n1"]) == (1, 1)
    assert (run.counts["answers_requested"], run.counts["failed_calls"]) == (0, 0)
    assert run.answers["error"].to_pylist()[0].startswith("search queries: model call failed")
    assert sum(r["failures"] for r in calls) == 1  # the one query call both settings wait for
