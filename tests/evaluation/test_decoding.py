"""The evaluation's decoding settings (seed 003, 4.1: "using top-p = 1.0, repetition penalty 1.05,
and temperature 0.2"; RefLVQA's, seed 004, C.2: temperature 0.7, top-p 0.95, images at most 512 px):
the paper's by default, applied to the evaluated model, and what a backend cannot set is named
(issue 32 item 4, issue 43 item 4). The flow runs' checks are in tests/flows/test_evaluate_flow.py
and tests/flows/test_reflvqa_flow.py."""

from __future__ import annotations

import pytest
import yaml

from mmcurate.benchmarks.reflvqa import RefLVQAEvalConfig
from mmcurate.benchmarks.shared import Decoding
from mmcurate.core.config import ModelSpec, load_config
from mmcurate.core.errors import ConfigError
from mmcurate.evaluation.decoding import REFLVQA, decoded_spec, decoding_note, decoding_record
from mmcurate.models.backends.openai_compat import OpenAICompatBackend
from mmcurate.models.client import penalty_field
from mmcurate.models.requests import ChatRequest

GPT = ModelSpec(name="gpt", backend="openai", model="gpt-4o", temperature=0.0, top_p=0.5, repetition_penalty=1.0)
VLLM = ModelSpec(name="qwen", backend="openai", model="Qwen", base_url="http://gpu:8000/v1", temperature=0.7)


def body(spec: ModelSpec) -> dict:
    backend = OpenAICompatBackend(
        spec, None, spec.base_url or "https://api.openai.com/v1", None, spec.model, penalty_field(spec)
    )
    return backend.body(ChatRequest("k", [], "t"), [])


def test_the_papers_values_are_the_default_and_reach_the_request_body():
    decoding = Decoding()
    assert (decoding.temperature, decoding.top_p, decoding.repetition_penalty, decoding.override) == (
        0.2,
        1.0,
        1.05,
        True,
    )
    sent = body(decoded_spec(VLLM, decoding))
    assert (sent["temperature"], sent["top_p"], sent["repetition_penalty"]) == (0.2, 1.0, 1.05)
    record = decoding_record(decoded_spec(VLLM, decoding), decoding)
    assert record["not_applied"] == {}
    assert decoding_note("qwen", record) == (
        "Decoding: temperature 0.2, top-p 1.0, repetition penalty 1.05, from evaluation.deflectionbench.decoding "
        "(seed 003, 4.1: top-p 1.0, repetition penalty 1.05, temperature 0.2)."
    )


def test_openai_cannot_take_the_repetition_penalty_and_the_notes_say_so():
    decoding = Decoding(closed_apis=[])  # read as open weights: the override reaches it
    spec = decoded_spec(GPT, decoding)
    sent = body(spec)
    assert (sent["temperature"], sent["top_p"]) == (0.2, 1.0) and "repetition_penalty" not in sent
    note = decoding_note("gpt", decoding_record(spec, decoding))
    assert note.endswith("Not applied: repetition penalty (gpt: api.openai.com rejects the field, so it is not sent).")


def test_a_closed_api_keeps_its_own_decoding_whatever_the_override():
    """Seed 003, 4.1 (L560-562): "Closed-source APIs are queried with their default decoding
    settings": ``override: true`` sets an open-weight model's sampling, never a closed API's
    (issue 43 item 5)."""
    decoding = Decoding()  # override: true, the paper's values
    assert decoded_spec(GPT, decoding) is GPT  # api.openai.com: a closed API by default
    sent = body(decoded_spec(GPT, decoding))
    assert (sent["temperature"], sent["top_p"]) == (0.0, 0.5)
    record = decoding_record(GPT, decoding)
    assert (record["reading"], record["temperature"], record["top_p"]) == ("closed_api", 0.0, 0.5)
    assert (
        "from gpt's model spec: a closed API, queried with its default decoding settings (seed 003, 4.1), "
        "whatever decoding.override says."
    ) in decoding_note("gpt", record)
    assert decoding_record(decoded_spec(VLLM, decoding), decoding)["reading"] == "evaluation"
    # a hosted API behind a base_url is named; the model list then decides alone
    claude = ModelSpec(
        name="claude", backend="openai", model="claude-opus-4", base_url="https://api.example/v1", temperature=1.0
    )
    named = Decoding(closed_apis=["claude"])
    assert decoded_spec(claude, named) is claude and decoded_spec(VLLM, named).temperature == 0.2
    assert decoded_spec(claude, decoding).temperature == 0.2  # unnamed behind a base_url: open weights


def test_closed_apis_must_be_defined_models(tmp_path):
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump({"evaluation": {"deflectionbench": {"decoding": {"closed_apis": ["nowhere"]}}}}))
    with pytest.raises(ConfigError, match="nowhere"):
        load_config(path)


def test_override_false_keeps_the_model_specs_own_sampling():
    decoding = Decoding(override=False, closed_apis=[])
    assert decoded_spec(GPT, decoding) is GPT
    record = decoding_record(GPT, decoding)
    assert (record["reading"], record["temperature"], record["top_p"]) == ("model", 0.0, 0.5)
    assert "from gpt's model spec (decoding.override: false)" in decoding_note("gpt", record)


@pytest.mark.parametrize("field, value", [("top_p", 0.0), ("temperature", 2.5), ("repetition_penalty", 0.0)])
def test_decoding_values_are_range_checked_at_load(tmp_path, field, value):
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump({"evaluation": {"deflectionbench": {"decoding": {field: value}}}}))
    with pytest.raises(ConfigError, match=rf"evaluation\.deflectionbench\.decoding\.{field}"):
        load_config(path)


def test_reflvqa_answers_with_appendix_c2s_settings():
    cfg = RefLVQAEvalConfig()
    generation = cfg.decoding
    assert (
        generation.temperature,
        generation.top_p,
        generation.repetition_penalty,
        generation.image_max_side,
        cfg.answer_max_tokens,
    ) == (0.7, 0.95, 1.0, 512, 2048)
    vision = VLLM.model_copy(update={"vision": True})
    spec = decoded_spec(vision, generation)
    sent = body(spec)
    assert (sent["temperature"], sent["top_p"], sent["repetition_penalty"]) == (0.7, 0.95, 1.0)
    assert spec.image_max_side == 512 and vision.image_max_side is None
    record = decoding_record(spec, generation)
    assert (record["image_max_side"], record["not_applied"]) == (512, {})
    assert decoding_note("qwen", record, REFLVQA) == (
        "Decoding: temperature 0.7, top-p 0.95, repetition penalty 1.0, longest image side (px) 512, from "
        "evaluation.reflvqa.decoding (seed 004, C.2: nucleus sampling with temperature 0.7 and top-p 0.95, images "
        "at most 512 px; it names no repetition penalty: 1.0, none)."
    )
    # a model without vision is sent no image to rescale: said so
    blind = decoding_record(decoded_spec(VLLM, generation), generation)
    assert blind["not_applied"] == {"image_max_side": "it sees no images (vision: false), so none is sent to rescale"}
    # the DeflectionBench record is what it was: no image side
    assert "image_max_side" not in decoding_record(decoded_spec(vision, Decoding()), Decoding())


def test_a_model_sending_images_as_stored_keeps_its_cache_identity():
    assert "image_max_side" not in VLLM.identity()
    assert VLLM.model_copy(update={"image_max_side": 512}).identity()["image_max_side"] == 512


@pytest.mark.parametrize("field, value", [("top_p", 1.5), ("temperature", -0.1), ("image_max_side", 0)])
def test_reflvqa_decoding_values_are_range_checked_at_load(tmp_path, field, value):
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump({"evaluation": {"reflvqa": {"decoding": {field: value}}}}))
    with pytest.raises(ConfigError, match=rf"evaluation\.reflvqa\.decoding\.{field}"):
        load_config(path)
