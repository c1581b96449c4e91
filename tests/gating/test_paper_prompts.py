"""A template file with the paper's prompt texts reaches the model byte for byte (issue 32 item 5).

The project ships its own wording "in our words" (gating/prompts.py); a run that must use the
published prose of seed 003's Figures 6-9 puts it in a template file. These texts stand for the
figures' (the paper's layout: a system prompt of several lines with a bulleted list, typographic
quotes, an abstention instruction ending in "Answer:"); what is pinned is that each reaches the
scripted backend, and the body an OpenAI-compatible server would receive, unchanged: the
evaluation's system prompt and the end of its user turn, and Stage I's and Stage III's system prompts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmcurate.annotation.deflectionbench.oracle import OracleCheck
from mmcurate.benchmarks.deflectionbench import GatingConfig
from mmcurate.core.config import ModelSpec, load_config
from mmcurate.evaluation.deflectionbench.scenarios import evaluate
from mmcurate.gating import prompts
from mmcurate.gating.parametric import ParametricGate
from mmcurate.models import client as model_client
from mmcurate.models.backends.messages import to_openai_messages
from mmcurate.models.backends.openai_compat import OpenAICompatBackend
from mmcurate.models.requests import ChatRequest
from tests.gating.test_prompts import config

FIGURE_6 = (
    "You stand for the system prompt of Figure 6 in a RAG test.\n"
    "You may receive:\n\n"
    "- Textual information from documents\n"
    "- Visual information from images\n"
    "- Content that combines both  \n"
)  # two trailing spaces and a newline: kept
FIGURES_7_TO_9 = {
    "abstention_soft": "Stand-in for Figure 7: answer from what you have; you may abstain. Answer:",
    "abstention_moderate": (
        "Stand-in for Figure 8: answer only when confident.\nIf unsure, abstain rather than guess. Answer:"
    ),
    "abstention_severe": "Stand-in for Figure 9: if in ANY doubt state \u201cI cannot answer this question.\u201d Answer:",
}
STAGE_I = "Stand-in Stage I prompt:\tanswer from the image alone."
STAGE_III = "Stand-in Stage III prompt \u2014 answer from the evidence."


@pytest.fixture
def paper_templates(tmp_path: Path) -> prompts.PromptSet:
    texts = {"eval_system": FIGURE_6, **FIGURES_7_TO_9, "parametric": STAGE_I, "evidence": STAGE_III}
    return prompts.prompt_set(load_config(config(tmp_path, texts, "figures.yaml")).deflectionbench.prompts)


@pytest.fixture
def backends(monkeypatch) -> list:
    """Every backend the model pool opens, to read what reached the model (``ScriptedBackend.asked``)."""
    opened = []
    real = model_client.make_backend

    def make_backend(*args, **kwargs):
        opened.append(real(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(model_client, "make_backend", make_backend)
    return opened


def asked(backends: list) -> list[list[dict]]:
    return [messages for backend in backends for _, messages in backend.asked]


def wire(messages: list[dict]) -> list[dict]:
    """The messages of the JSON body an OpenAI-compatible server would receive."""
    spec = ModelSpec(name="m", backend="openai", model="x", base_url="http://server/v1")
    backend = OpenAICompatBackend(spec, None, "http://server/v1", None, "x", penalty_field="repetition_penalty")
    body = backend.body(ChatRequest("k", messages, "t"), to_openai_messages(messages, None, vision=False)[0])
    return json.loads(json.dumps(body))["messages"]


@pytest.mark.parametrize("level", ["soft", "moderate", "severe"])
def test_the_evaluation_sends_the_figures_text_byte_for_byte(world, make, paper_templates, backends, level):
    m = world.add("m", [], default="Paris")
    sample = make.sample("s", "Which city?", ["Paris"], images=[], negatives=[make.text("n1", "Rome is in Italy.")])
    evaluate(
        make.table([sample]),
        world.pool,
        world.judge,
        m,
        ["oracle", "realistic"],
        2,
        level,
        0,
        "e",
        templates=paper_templates,
    )
    sent = asked(backends)
    assert len(sent) == 2
    for messages in sent:
        assert messages[0] == {"role": "system", "content": FIGURE_6}
        assert messages[1]["content"][-1] == {"type": "text", "text": FIGURES_7_TO_9[f"abstention_{level}"]}
        system, user = wire(messages)
        assert system["content"].encode() == FIGURE_6.encode()
        assert user["content"].endswith("\nQuestion: Which city?\n" + FIGURES_7_TO_9[f"abstention_{level}"])


def test_stages_one_and_three_send_the_files_system_prompts_byte_for_byte(world, make, paper_templates, backends):
    m = world.add("m", [], default="Rome")  # INCORRECT without context: Stage I keeps the sample
    sample = make.sample("s", "Which city?", ["Paris"], images=[], negatives=[make.text("n1", "Rome is in Italy.")])
    ParametricGate(GatingConfig(pool=[m]), paper_templates).run(make.table([sample]), world.ctx())
    OracleCheck([m], k_min=1, templates=paper_templates).run(make.table([sample]), world.ctx())
    systems = [messages[0]["content"] for messages in asked(backends)]
    assert systems[0] == STAGE_I and set(systems[1:]) == {STAGE_III} and len(systems) >= 2
    assert [wire(messages)[0]["content"] for messages in asked(backends)] == systems
