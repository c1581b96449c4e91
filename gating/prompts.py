"""Every prompt the DeflectionBench stages and the evaluation send, with a version id.

A template's ``id`` enters the response-cache key (``ChatRequest.template``): change a
template's wording and bump its suffix, or cached answers to the old wording would be
reused. Messages use the OpenAI chat shape of ``models.requests``: a system message, then
one user message whose parts are the evidence (text parts with titles, image parts by
sha256), the question's images and the question itself. Non-vision models get the same
request; the client drops the image parts for them.

Contexts are passed as plain dicts in the canonical ``CONTEXT`` shape (``context_id``,
``modality``, ``text``, ``image``, ``title``), as they come out of an Arrow row.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mmcurate.core.errors import MmcurateError


@dataclass(frozen=True)
class Template:
    id: str  # "gate.parametric.v1": bump the suffix whenever ``system`` changes
    system: str


# Stage I: can a model answer from what it already knows? It must always commit to an
# answer, so that "does not know" shows up as a wrong answer, not as a polite refusal.
PARAMETRIC = Template(
    id="gate.parametric.v1",
    system=(
        "You answer questions about images. Reply with the answer only: a name, a number, "
        "a date or a short phrase, with no explanation. If you are not sure, still give "
        "your single best guess."
    ),
)

# Stage III: can a model answer with the given evidence (the gold contexts, or one
# distractor alone)? Same wording for both checks: only the evidence differs.
WITH_EVIDENCE = Template(
    id="oracle.evidence.v1",
    system=(
        "You answer questions about images using the evidence provided with the question. "
        "Reply with the answer only: a name, a number, a date or a short phrase, with no "
        "explanation. If you are not sure, still give your single best guess."
    ),
)

# Evaluation: one system prompt, plus an abstention instruction of three strengths, or none
# at all (the strictness sweep's baseline: the system prompt alone, no word about abstaining).
EVAL_SYSTEM = (
    "You answer questions about images. Evidence retrieved for the question may be given "
    "with it: passages and images, some of which may be irrelevant to the question. "
    "Answer briefly, with the answer first."
)
ABSTENTION: dict[str, str] = {
    "none": "",
    "soft": (
        "If neither the evidence nor what you know lets you answer, you may reply "
        "\"I don't know\"."
    ),
    "moderate": (
        "Answer only when the evidence given (or, when there is none, what you reliably "
        "know) supports the answer. Otherwise reply exactly \"I don't know\"."
    ),
    "severe": (
        "Be strict. Give an answer only when the evidence given states it plainly; when "
        "there is no evidence, only when you are certain. If the evidence is missing, off "
        "topic, contradictory or merely suggestive, reply exactly \"I don't know\". A wrong "
        "answer is much worse than no answer."
    ),
}
DEFAULT_ABSTENTION = "moderate"
STRICTNESS_LEVELS = ("none", "soft", "moderate", "severe")  # the sweep, weakest first
EVAL_VERSION = "v1"


def check_abstention(abstention: str) -> None:
    if abstention not in ABSTENTION:
        raise MmcurateError(f"unknown abstention level {abstention!r}; known: {', '.join(STRICTNESS_LEVELS)}")


def eval_template(abstention: str = DEFAULT_ABSTENTION) -> Template:
    """The evaluation template for one abstention level (``none``/``soft``/``moderate``/``severe``)."""
    check_abstention(abstention)
    system = f"{EVAL_SYSTEM} {ABSTENTION[abstention]}".strip()
    return Template(id=f"eval.{abstention}.{EVAL_VERSION}", system=system)


def evidence_parts(contexts: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Numbered evidence: ``[i] title: text`` for passages; a caption line, then the image."""
    if not contexts:
        return [{"type": "text", "text": "Evidence: none."}]
    parts: list[dict] = [{"type": "text", "text": "Evidence:"}]
    for number, ctx in enumerate(contexts, start=1):
        title = (ctx.get("title") or "").strip()
        text = (ctx.get("text") or "").strip()
        if ctx.get("modality") == "image":
            label = f"[{number}] Image" + (f": {title}" if title else "") + (f". {text}" if text else "")
            parts.append({"type": "text", "text": label})
            parts.append({"type": "image", "sha256": ctx["image"]})
        else:
            head = f"[{number}] {title}: " if title else f"[{number}] "
            parts.append({"type": "text", "text": head + text})
    return parts


def build_messages(
    template: Template,
    question: str,
    images: Sequence[str] = (),
    contexts: Sequence[Mapping[str, Any]] | None = None,
    history: Sequence[tuple[str, str]] = (),
) -> list[dict]:
    """System + one user message. ``contexts=None`` means no evidence section at all
    (parametric); an empty list says explicitly that no evidence was found. ``history``: the
    earlier turns of a conversation, (question, the answer given), as user / assistant
    messages before this one (as CRAG-MM's evaluator hands them to an agent)."""
    earlier = [{"role": role, "content": text} for question, answer in history
               for role, text in (("user", question), ("assistant", answer))]
    parts: list[dict] = []
    if contexts is not None:
        parts.extend(evidence_parts(contexts))
    for sha in images:
        parts.append({"type": "image", "sha256": sha})
    parts.append({"type": "text", "text": f"Question: {question.strip()}"})
    return [{"role": "system", "content": template.system}, *earlier, {"role": "user", "content": parts}]


def all_templates() -> list[Template]:
    """Every template (for manifests: which prompt versions produced a release)."""
    return [PARAMETRIC, WITH_EVIDENCE] + [eval_template(level) for level in ABSTENTION]
