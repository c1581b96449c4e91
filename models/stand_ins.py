"""What a stand-in model is and how every output names it.

A stand-in is a model that takes the place of the one a paper uses: a scripted model (its
answers are rules in a file) or the embedded llama.cpp model (SmolLM2, far smaller than any
paper's). A model served by an OpenAI-compatible endpoint or vLLM is taken as the real thing.
Release notes, cards and evaluation tables say which stand-ins ran, each in one line that
names the role, the model and what it replaced; the scripted model by its rules file's name
(the path is the builder's, as in ``ModelSpec.identity``).
"""

from __future__ import annotations

from mmcurate.core.config import ModelSpec


def stand_in_note(role: str, spec: ModelSpec, replaces: str, sees: bool = False) -> str | None:
    """The line naming ``spec`` as the stand-in serving ``role`` in place of ``replaces`` (the
    paper's model), or None when it is no stand-in. ``sees``: the role is given the image, so a
    stand-in that does not see it says so."""
    if spec.backend == "scripted" and spec.script is not None:  # a scripted model names its rules
        return f"{role}: scripted model {spec.name!r} (rules in {spec.script.name}) stands in for {replaces}."
    if spec.backend == "embedded":
        blind = " (it does not see the image)" if sees and not spec.vision else ""
        return f"{role}: the embedded {spec.gguf} model stands in for {replaces}{blind}."
    return None
