"""A dead model: every answer call fails, so the evaluation stops with the count instead of
writing a table of failures (partial failures are written and counted)."""
from __future__ import annotations

import pyarrow as pa
import pytest

from mmcurate.core.config import ModelSpec, Settings
from mmcurate.evaluation.scenarios import EvaluationError
from mmcurate.releases.reflvqa_tables import KNOWLEDGE_BASE
from mmcurate.tasks.evaluate import answer_reflvqa, answer_scenarios


def settings(tmp_path, default):
    script = tmp_path / "dead.jsonl"
    script.write_text('{"when_all": ["Q-ALIVE"], "answer": "Paris"}\n')
    return Settings(workdir=tmp_path / "work", models={"dead": ModelSpec(name="dead", backend="scripted", script=script,
                                                                          default=default)})


def test_deflectionbench_all_failed_raises_with_the_count(tmp_path, make):
    rows = make.table([make.sample(str(i), f"Q-{i}?", ["Paris"]) for i in range(2)])
    with pytest.raises(EvaluationError, match=r"every answer call failed: model 'dead' failed 4 of 4 calls \(first error: .+\); nothing written"):
        answer_scenarios.fn(rows, settings(tmp_path, None), "dead", ["oracle", "parametric"], [2], ["moderate"], 0, "r")
    alive = make.table([make.sample("a", "Q-ALIVE?", ["Paris"]), make.sample("b", "Q-B?", ["Paris"])])
    results, calls = answer_scenarios.fn(alive, settings(tmp_path, None), "dead", ["oracle"], [2], ["moderate"], 0, "r")
    assert sorted(results["grade"].to_pylist()) == ["CORRECT", "FAILED"]  # partial: written, counted
    assert sum(r["failures"] for r in calls) == 1


def test_reflvqa_all_failed_raises_with_the_count(tmp_path):
    qa = [{"sample_id": "q", "question": "Q-DEAD?", "images": [], "answer": "x",
           "sentences": [{"index": 0, "text": "x", "fact_checkable": True, "text_citations": ["d"],
                          "image_citations": [], "flagged": False}]}]
    kb = pa.Table.from_pylist([{"doc_id": "d", "modality": "text", "text": "Q-DEAD answer", "image": None,
                                "title": "D"}], schema=KNOWLEDGE_BASE)
    with pytest.raises(EvaluationError, match=r"every answer call failed: model 'dead' failed 1 of 1 calls \(first error: "):
        answer_reflvqa.fn(qa, kb, settings(tmp_path, None), "dead", "r")
