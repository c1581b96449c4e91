"""Model-major runs: eliminated items skip later models; a new model is the only one called."""

from __future__ import annotations

import json

from mmcurate.core.config import ModelSpec, Settings
from mmcurate.models.accounting import CallCounter
from mmcurate.models.client import ModelPool
from mmcurate.models.requests import ChatRequest, ChatResponse
from mmcurate.models.schedule import model_major

ITEMS = ["q1", "q2", "q3", "q4"]
KNOWS = {"small": ["q1"], "medium": ["q1", "q2"], "large": ["q3"]}  # what each model answers right


def settings(tmp_path, names):
    models = {}
    for name in names:
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"when_all": [f"[{q}]"], "answer": "right"}) + "\n" for q in KNOWS[name]))
        models[name] = ModelSpec(name=name, backend="scripted", script=path, default="wrong")
    return Settings(models=models)


def run(pool, names):
    seen: dict[str, list[str]] = {}
    solved: set[str] = set()

    def on_answers(model: str, pairs: list[tuple[str, ChatResponse]]) -> None:
        seen[model] = [item for item, _ in pairs]
        solved.update(item for item, response in pairs if response.text == "right")

    model_major(
        pool,
        names,
        ITEMS,
        build=lambda q, spec: ChatRequest(q, [{"role": "user", "content": f"Answer [{q}]"}], "gate.v1"),
        on_answers=on_answers,
        eliminated=lambda q: q in solved,
        stage="gate",
    )
    return seen, solved


def test_early_elimination(tmp_path, cache, counter):
    with ModelPool(settings(tmp_path, ["small", "medium", "large"]), cache, None, counter) as pool:
        seen, solved = run(pool, ["small", "medium", "large"])
        assert pool.opened == []  # each model released after its batch
    assert seen == {"small": ["q1", "q2", "q3", "q4"], "medium": ["q2", "q3", "q4"], "large": ["q3", "q4"]}
    assert solved == {"q1", "q2", "q3"}


def test_rerun_with_one_new_model_calls_only_it(tmp_path, cache, counter):
    with ModelPool(settings(tmp_path, ["small", "medium"]), cache, None, counter) as pool:
        run(pool, ["small", "medium"])
    rerun = CallCounter()
    with ModelPool(settings(tmp_path, ["small", "medium", "large"]), cache, None, rerun) as pool:
        run(pool, ["small", "medium", "large"])
    no_usage = {"usage_calls": 0, "prompt_tokens": 0, "completion_tokens": 0}  # scripted models report none
    assert rerun.rows() == [
        {"stage": "gate", "model": "large", "calls": 2, "cache_hits": 0, "failures": 0, **no_usage},
        {"stage": "gate", "model": "medium", "calls": 0, "cache_hits": 3, "failures": 0, **no_usage},
        {"stage": "gate", "model": "small", "calls": 0, "cache_hits": 4, "failures": 0, **no_usage},
    ]
