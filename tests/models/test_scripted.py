"""Scripted backend: first matching rule wins, else the default, else an error; and the
progress a client reports while it answers a batch."""

from __future__ import annotations

import json

import pytest

from mmcurate.core.config import ModelSpec, Settings
from mmcurate.models.accounting import CallCounter
from mmcurate.models.backends.base import BackendError
from mmcurate.models.backends.scripted import ScriptedBackend
from mmcurate.models.cache import ResponseCache
from mmcurate.models.client import ModelClient, ModelPool
from mmcurate.models.requests import ChatRequest

RULES = [
    {"when_all": ["capital", "France"], "when_none": ["river"], "answer": "Paris"},
    {"when_all": ["France"], "answer": "somewhere in France"},
    {"when_none": ["France", "Spain"], "when_all": ["Europe"], "answer": "Europe it is"},
]


def script(tmp_path, rules=RULES):
    path = tmp_path / "rules.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rules) + "\n")
    return path


def ask(key: str, *texts: str) -> ChatRequest:
    parts = [{"type": "text", "text": t} for t in texts] + [{"type": "image", "sha256": "ab" * 32}]
    return ChatRequest(key, [{"role": "system", "content": "be brief"}, {"role": "user", "content": parts}], "s.v1")


def test_rules_default_and_cache(tmp_path, cache, counter):
    spec = ModelSpec(name="rules", backend="scripted", script=script(tmp_path), default="no idea")
    client = ModelClient(spec, ScriptedBackend(spec), cache, counter)
    batch = [
        ask("a", "What is the capital", "of France?"),  # parts joined: both substrings present
        ask("b", "Which river crosses the capital of France?"),  # when_none blocks rule 1
        ask("c", "A country in Europe?"),
        ask("d", "Spain or Europe?"),  # rule 3 blocked, nothing else matches
    ]
    assert [r.text for r in client.chat(batch, "s")] == ["Paris", "somewhere in France", "Europe it is", "no idea"]
    assert all(r.cached for r in client.chat(batch, "s"))
    assert counter.totals == {"calls": 4, "cache_hits": 4, "failures": 0}


def test_no_rule_and_no_default_is_a_failed_call(tmp_path, cache, counter):
    spec = ModelSpec(name="rules", backend="scripted", script=script(tmp_path))
    client = ModelClient(spec, ScriptedBackend(spec), cache, counter)
    (response,) = client.chat([ask("x", "Mars?")], "s")
    assert response.text is None and "no scripted rule matched" in response.error
    assert counter.totals["failures"] == 1


def test_editing_the_script_invalidates_cached_answers(tmp_path, cache, counter):
    path = script(tmp_path)
    spec = ModelSpec(name="rules", backend="scripted", script=path)
    first = ModelClient(spec, ScriptedBackend(spec), cache, counter).chat([ask("a", "capital of France")], "s")
    path.write_text(json.dumps({"when_all": ["France"], "answer": "Lyon"}) + "\n")
    second = ModelClient(spec, ScriptedBackend(spec), cache, counter).chat([ask("a", "capital of France")], "s")
    assert (first[0].text, second[0].text, second[0].cached) == ("Paris", "Lyon", False)


def test_bad_rule_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"answer": "ok"}\n\n{"when_all": "France", "answer": 3}\n')
    with pytest.raises(BackendError, match=r"bad\.jsonl:3: bad rule"):
        ScriptedBackend(ModelSpec(name="bad", backend="scripted", script=path))


def test_a_batch_reports_its_progress_in_about_ten_steps(tmp_path):
    script = tmp_path / "rules.jsonl"
    script.write_text("")
    spec = ModelSpec(name="m", backend="scripted", script=script, default="Paris")
    heard: list[tuple[str, str, int, int]] = []
    batch = [ChatRequest(f"k{i}", [{"role": "user", "content": f"question {i}"}], "t") for i in range(40)]
    with ResponseCache.open(f"sqlite:///{tmp_path / 'cache.sqlite'}") as cache:
        with ModelPool(
            Settings(models={"m": spec}), cache, None, CallCounter(), progress=lambda *event: heard.append(event)
        ) as pool:
            pool.client("m").chat(batch[:10], "stage")  # ten of them answered before
            heard.clear()
            pool.client("m").chat(batch, "stage")
    assert heard[0] == ("stage", "m", 10, 40)  # the cached ones count from the start
    assert [answered for *_, answered, _ in heard] == [10, 12, 16, 20, 24, 28, 32, 36, 40]
    assert {(stage, model, planned) for stage, model, _, planned in heard} == {("stage", "m", 40)}


def test_every_request_is_a_call_or_a_cache_hit(tmp_path, cache, counter):
    """An identical request of the same batch is sent once and counted as a cache hit (its
    answer was just cached), so calls + cache hits = requests, as the progress log counts
    them, on a first run as on a rerun."""
    spec = ModelSpec(name="rules", backend="scripted", script=script(tmp_path), default="no idea")
    client = ModelClient(spec, ScriptedBackend(spec), cache, counter)
    batch = [ask("a", "Spain?"), ask("b", "Spain?"), ask("c", "Europe?")]
    assert [r.text for r in client.chat(batch, "s")] == ["no idea", "no idea", "Europe it is"]
    assert counter.totals == {"calls": 2, "cache_hits": 1, "failures": 0}
    client.chat(batch, "s")
    assert counter.totals == {"calls": 2, "cache_hits": 4, "failures": 0}
