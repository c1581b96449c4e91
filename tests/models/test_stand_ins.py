"""A stand-in model is named one way in every output (models.stand_ins)."""

from __future__ import annotations

from pathlib import Path

from mmcurate.core.config import ModelSpec
from mmcurate.models.stand_ins import stand_in_note


def test_scripted_and_embedded_models_are_stand_ins_named_by_role_model_and_what_they_replace():
    scripted = ModelSpec(name="reader", backend="scripted", script=Path("/home/builder/rules/reader.jsonl"))
    assert stand_in_note("verifier", scripted, "the paper's larger model") == (
        "verifier: scripted model 'reader' (rules in reader.jsonl) stands in for the paper's larger model."
    )
    embedded = ModelSpec(name="smollm2", backend="embedded")
    assert stand_in_note("router", embedded, "the paper's Llama 3.2 models", sees=True) == (
        "router: the embedded smollm2 model stands in for the paper's Llama 3.2 models (it does not see the image)."
    )
    assert stand_in_note("router", embedded, "the paper's Llama 3.2 models") == (
        "router: the embedded smollm2 model stands in for the paper's Llama 3.2 models."
    )
    served = ModelSpec(name="qwen", backend="openai", model="Qwen/Qwen2.5-VL-7B-Instruct", vision=True)
    assert stand_in_note("router", served, "the paper's Llama 3.2 models") is None
