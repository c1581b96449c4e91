"""Every prompt the DeflectionBench stages and the evaluation send, with a version id.

A template's ``id`` enters the response-cache key (``ChatRequest.template``): change a
built-in wording and bump its suffix, or cached answers to the old wording would be reused.
Messages use the OpenAI chat shape of ``models.requests``: a system message, then one user
message whose parts are the evidence (text parts with titles, image parts by sha256), the
question's images, the question itself and, last, the template's ``instruction`` if it has
one. Non-vision models get the same request; the client drops the image parts for them.

The texts are named pieces (``TEMPLATE_NAMES``, the ``PromptName`` of ``core.config``):

- ``parametric``: Stage I's system prompt (the question and its images, no evidence);
- ``evidence``: Stage III's system prompt (the gold contexts, or one distractor alone);
- ``best_guess``: the sentence both get with ``gating.force_guess: true``. The paper asks for
  no forced guess (seed 003, section 3.1), and a model that declines then counts as
  NOT_ATTEMPTED, which drops a Stage I sample; forcing a guess turns many of those
  abstentions into INCORRECT answers, which keep it;
- ``eval_system``: the evaluation's system prompt (the paper's Figure 6: a RAG assistant that
  may be given text, images or both);
- ``abstention_<level>``: what ends the evaluation's user turn, one per strictness level,
  each asking for the answer: ``soft``, ``moderate`` (every evaluation's default) and
  ``severe`` follow the instructions of the paper's Figures 7, 8 and 9 in our words (severe
  demands the exact refusal "I cannot answer this question."); ``none`` only asks for the
  answer (the strictness sweep's baseline, Tables 6 and 9).

A config may replace any of them with a YAML file of templates (``deflectionbench.prompts``,
read at load; ``core.config.PromptFile``): a name it gives replaces that text, the rest stay
built in. A template built from any replaced text gets the id ``<kind>.custom-<sha256[:12]>``
of its texts, so its answers never share a cache entry with the built-in wording, and every
output names the set (``PromptSet.source``).

Contexts are passed as plain dicts in the canonical ``CONTEXT`` shape (``context_id``,
``modality``, ``text``, ``image``, ``title``), as they come out of an Arrow row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from mmcurate.benchmarks.shared import PromptFile, PromptName
from mmcurate.core.errors import MmcurateError


@dataclass(frozen=True)
class Template:
    id: str  # "gate.parametric.v2": bump the suffix whenever the wording changes
    system: str
    instruction: str = ""  # ends the user turn, after the question (the evaluation's abstention level)


TEMPLATE_NAMES: tuple[str, ...] = get_args(PromptName)
STRICTNESS_LEVELS = ("none", "soft", "moderate", "severe")  # the sweep, weakest first
DEFAULT_ABSTENTION = "moderate"  # the paper's every evaluation (seed 003, Appendix I)
REFUSAL = "I cannot answer this question."  # the severe level's exact refusal (Figure 9)

BUILT_IN_TEXTS: dict[str, str] = {
    "parametric": (
        "You answer questions about images. Reply with the answer only: a name, a number, "
        "a date or a short phrase, with no explanation."
    ),
    "evidence": (
        "You answer questions about images using the evidence provided with the question. "
        "Reply with the answer only: a name, a number, a date or a short phrase, with no "
        "explanation."
    ),
    "best_guess": "If you are not sure, still give your single best guess.",
    "eval_system": (
        "You are an assistant answering questions with retrieval-augmented generation. Along "
        "with a question you may be given passages of text from retrieved documents, images, "
        "or content that mixes text and images."
    ),
    "abstention_none": "Answer:",
    "abstention_soft": (
        "Use the information you have to answer the question; you may decline to answer if you need to. Answer:"
    ),
    "abstention_moderate": (
        "Give an answer only if you are confident that it is accurate. If you are unsure, or "
        "the information you have is not enough for a reliable answer, decline rather than "
        "guess. Answer:"
    ),
    "abstention_severe": (
        "Answer only when you are completely sure that your answer is right. If you have any "
        f"doubt at all, you must refuse, replying with exactly: {REFUSAL} Never offer a "
        "partial or hedged answer. Answer:"
    ),
}
# the built-in ids: the forced-guess wording is the one every release before it was made with
BUILT_IN_IDS = {
    "parametric": "gate.parametric.v2",
    "parametric+guess": "gate.parametric.v1",
    "evidence": "oracle.evidence.v2",
    "evidence+guess": "oracle.evidence.v1",
    **{f"eval.{level}": f"eval.{level}.v2" for level in STRICTNESS_LEVELS},
}


def check_abstention(abstention: str) -> None:
    if abstention not in STRICTNESS_LEVELS:
        raise MmcurateError(f"unknown abstention level {abstention!r}; known: {', '.join(STRICTNESS_LEVELS)}")


@dataclass(frozen=True)
class PromptSet:
    """The texts every DeflectionBench prompt is built from, and where they came from."""

    texts: Mapping[str, str] = field(default_factory=lambda: dict(BUILT_IN_TEXTS))
    source: str = "built-in"  # or "<file name> (sha256 <hex>)"

    def _template(self, kind: str, system: Sequence[str], instruction: str | None = None) -> Template:
        """The system texts joined, and the instruction; the built-in id while every text used
        is built in, else ``<kind>.custom-<sha256 of the texts>``."""
        text = " ".join(self.texts[name] for name in system)
        tail = self.texts[instruction] if instruction else ""
        used = [*system, *([instruction] if instruction else [])]
        if all(self.texts[name] == BUILT_IN_TEXTS[name] for name in used):
            return Template(BUILT_IN_IDS[kind], text, tail)
        digest = hashlib.sha256(f"{text}\x00{tail}".encode()).hexdigest()[:12]
        return Template(f"{BUILT_IN_IDS[kind].rsplit('.', 1)[0]}.custom-{digest}", text, tail)

    def parametric(self, force_guess: bool = False) -> Template:
        """Stage I: the question and its images, no evidence."""
        if force_guess:
            return self._template("parametric+guess", ["parametric", "best_guess"])
        return self._template("parametric", ["parametric"])

    def evidence(self, force_guess: bool = False) -> Template:
        """Stage III: the gold contexts, or one distractor alone."""
        if force_guess:
            return self._template("evidence+guess", ["evidence", "best_guess"])
        return self._template("evidence", ["evidence"])

    def evaluation(self, abstention: str = DEFAULT_ABSTENTION) -> Template:
        """The evaluation template for one abstention level (``none``/``soft``/``moderate``/``severe``)."""
        check_abstention(abstention)
        return self._template(f"eval.{abstention}", ["eval_system"], f"abstention_{abstention}")

    def describe(self, template_ids: Sequence[str]) -> str:
        """One line naming the set and the templates used, for cards and tables."""
        where = "built-in (gating/prompts.py)" if self.source == "built-in" else f"from {self.source}"
        return f"prompt templates {where}: {', '.join(template_ids)}"


BUILT_IN = PromptSet()


def prompt_set(prompts: PromptFile | None) -> PromptSet:
    """The set a config asks for: built in, or its file's templates over the built-in ones."""
    if prompts is None:
        return BUILT_IN
    if prompts.templates is None or prompts.sha256 is None:
        raise MmcurateError(f"prompt templates {prompts.file} were not read (load the config with load_config)")
    texts: dict[str, str] = {**BUILT_IN_TEXTS, **prompts.templates}  # type: ignore[dict-item]  # template names are str keys
    return PromptSet(texts, f"{prompts.file.name} (sha256 {prompts.sha256})")


# the built-in templates by their default use (the planner, tests and verify-first's answer with context)
PARAMETRIC = BUILT_IN.parametric()
WITH_EVIDENCE = BUILT_IN.evidence()


def eval_template(abstention: str = DEFAULT_ABSTENTION) -> Template:
    """The built-in evaluation template for one abstention level."""
    return BUILT_IN.evaluation(abstention)


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
    earlier = [
        {"role": role, "content": text}
        for question, answer in history
        for role, text in (("user", question), ("assistant", answer))
    ]
    parts: list[dict] = []
    if contexts is not None:
        parts.extend(evidence_parts(contexts))
    for sha in images:
        parts.append({"type": "image", "sha256": sha})
    parts.append({"type": "text", "text": f"Question: {question.strip()}"})
    if template.instruction:
        parts.append({"type": "text", "text": template.instruction})
    return [{"role": "system", "content": template.system}, *earlier, {"role": "user", "content": parts}]
