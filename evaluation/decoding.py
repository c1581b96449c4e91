"""The evaluated model's decoding settings in an evaluation: DeflectionBench's and RefLVQA's.

Seed 003, section 4.1: open-weight models answer "using top-p = 1.0, repetition penalty 1.05,
and temperature 0.2"; "closed-source APIs are queried with their default decoding settings".
``evaluation.deflectionbench.decoding`` holds the three values (the paper's by default).
Seed 004, appendix C.2: responses are collected "using Nucleus sampling with T = 0.7 and p =
0.95", at most 2,048 new tokens, images rescaled so that neither side exceeds 512 pixels;
``evaluation.reflvqa.decoding`` holds them (``Generation``; the token budget is
``answer_max_tokens``). With ``override: true`` (the default) an open-weight evaluated model
answers with them whatever its model spec says (every field but ``override`` and ``closed_apis``
is the model-spec field of the same name), with ``false`` with its spec's own. A closed API
(``decoding.closed_apis``; for DeflectionBench by default an ``openai`` model at api.openai.com,
for RefLVQA none: C.2 gives every model its settings) answers with its model spec's own either
way: the override never sets its sampling. Each run records which of the three readings ran
(``evaluation``, ``model``, ``closed_api``), the values and what its backend could not set
(``models.client.unapplied_sampling``: e.g. api.openai.com takes no repetition penalty; a
scripted model does not sample; a model without vision is sent no image to rescale), in
``release.json`` and the table's notes.
"""

from __future__ import annotations

from typing import Any

from mmcurate.benchmarks.shared import Decoding
from mmcurate.core.config import ModelSpec
from mmcurate.models.client import unapplied_sampling

NAMES = {
    "temperature": "temperature",
    "top_p": "top-p",
    "repetition_penalty": "repetition penalty",
    "image_max_side": "longest image side (px)",
}
DEFLECTIONBENCH = (
    "evaluation.deflectionbench.decoding (seed 003, 4.1: top-p 1.0, repetition penalty 1.05, temperature 0.2)"
)
REFLVQA = (
    "evaluation.reflvqa.decoding (seed 004, C.2: nucleus sampling with temperature 0.7 and top-p 0.95, "
    "images at most 512 px; it names no repetition penalty: 1.0, none)"
)


def _fields(decoding: Decoding) -> list[str]:
    """The model-spec fields ``decoding`` sets: every field but ``override`` and ``closed_apis``."""
    return [name for name in type(decoding).model_fields if name not in ("override", "closed_apis")]


def closed_api(spec: ModelSpec, decoding: Decoding) -> bool:
    """Is ``spec`` a closed API: named in ``decoding.closed_apis``, or (None) an ``openai`` model
    without a ``base_url``, i.e. api.openai.com?"""
    if decoding.closed_apis is not None:
        return spec.name in decoding.closed_apis
    return spec.backend == "openai" and spec.base_url is None


def reading(spec: ModelSpec, decoding: Decoding) -> str:
    """Where ``spec``'s sampling comes from: ``closed_api`` (its spec's, whatever the override),
    ``evaluation`` (``decoding``'s values) or ``model`` (its spec's: ``override: false``)."""
    if closed_api(spec, decoding):
        return "closed_api"
    return "evaluation" if decoding.override else "model"


def decoded_spec(spec: ModelSpec, decoding: Decoding) -> ModelSpec:
    """``spec`` answering with ``decoding``'s values when they apply to it, else ``spec`` itself."""
    if reading(spec, decoding) != "evaluation":
        return spec
    return spec.model_copy(update={name: getattr(decoding, name) for name in _fields(decoding)})


def decoding_record(spec: ModelSpec, decoding: Decoding) -> dict[str, Any]:
    """What a run asked of ``spec`` (already ``decoded_spec``) and what its backend did not apply."""
    fields = _fields(decoding)
    not_applied = unapplied_sampling(spec)
    if "image_max_side" in fields and spec.image_max_side is not None:
        if not spec.vision:
            not_applied["image_max_side"] = "it sees no images (vision: false), so none is sent to rescale"
        elif spec.backend == "scripted":
            not_applied["image_max_side"] = "a scripted model answers by its rules and reads no pixels"
    return {
        "reading": reading(spec, decoding),
        **{name: getattr(spec, name) for name in fields},
        "not_applied": not_applied,
    }


def decoding_note(model: str, record: dict[str, Any], source: str = DEFLECTIONBENCH) -> str:
    """One line of the table's notes: the values, where they came from (``source``, the
    evaluation's settings; the model spec; or a closed API's own), what was not applied."""
    values = ", ".join(f"{label} {record[name]}" for name, label in NAMES.items() if name in record)
    origin = {
        "evaluation": source,
        "model": f"{model}'s model spec (decoding.override: false)",
        "closed_api": f"{model}'s model spec: a closed API, queried with its default decoding settings "
        "(seed 003, 4.1), whatever decoding.override says",
    }[record["reading"]]
    note = f"Decoding: {values}, from {origin}."
    unset: dict[str, list[str]] = {}
    for name, why in record["not_applied"].items():
        unset.setdefault(why, []).append(NAMES[name])
    for why, names in unset.items():
        note += f" Not applied: {', '.join(names)} ({model}: {why})."
    return note
