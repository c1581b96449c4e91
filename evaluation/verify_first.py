"""CRUISE's verification-first answering (seed 001: router 3.1, dual-path generation 3.3,
verification and Algorithm 1 3.4) as an answering system around any chat model.

For each question, with the evidence the evaluation would show (``contexts``; None or empty
when there is none):

1. router (the ``router`` model, default the answering model): one call whose reply gives two
   yes/no flags, *needs outside knowledge* and *time-sensitive* (one prompt for both, as the
   paper's appendix A.1 asks them). When the first is off nothing is retrieved:
   the context ``C`` is empty whatever evidence was available.
2. Algorithm 1's first line: a time-sensitive question whose retrieval score ``S_ret`` is
   below ``tau_ret`` is answered "I don't know" at once. ``S_ret`` is the best reranked score
   of the retrieved chunks on the [0, 1] scale (``retrieval.cutoffs``), 0 when nothing was
   retrieved (the router skipped retrieval, or the search found nothing). The paper gives no
   value for tau_ret: ours is 0.5 (``tau_ret``), the reranker's even odds. The test reads the
   scores whether or not a chunk survived the MAD cutoff (``retrieval_gate: score``, the
   paper's reading); ``retrieval_gate: context`` is the earlier reading, "no context
   survived". Evidence that a scenario gives rather than a retriever finds (DeflectionBench)
   has no retrieval score: there the test is whether ``C`` is empty, and the trace says so.
3. dual path: the model answers with ``C`` (an empty ``C`` says "Evidence: none.") and
   without any evidence section, both with the evaluation's own prompt
   (``gating.prompts.eval_template``), so the answer with context is the very answer the
   plain system gives (same request, same cache entry).
4. consistency: the model, as a judge, says yes/no whether the two answers agree (and agree
   with the evidence); no -> "I don't know".
5. chain-of-verification: the model rates the answer with context, replying
   ``CONFIDENCE: <0.0-1.0>`` on its first line (then reasoning and sub-questions, kept in the
   trace); the answer is returned when the confidence reaches 0.9 with a non-empty ``C`` or
   1.0 with an empty one, else "I don't know".

Every closed-set reply is read strictly (``models.labels``: first-token logprobs or exactly one
word for yes/no, the exact first line for the confidence; one retry, then an error). A check
that errs is never guessed: the system abstains and says which check failed (``gate_error``).
A failed answering call is a failed answer (``answer`` None, ``error`` set), as in the plain
evaluation. Prompts are versioned template ids (``TEMPLATES``) and go through the model pool.

Who checks (``verifier``): the answering model by default, as in CRUISE; another model of the
config; or ``lexical``, the offline stand-in for a model that cannot verify (SmolLM2 never
reaches 0.9): the two answers are consistent when they share a content word the question does
not hold, and the confidence is the share of the answer's content words beyond the question's
found in the evidence shown (0.0 without evidence: the CoV prompt's rule for knowledge neither
in the context nor visible).

The steps are shared with CRUISE on CRAG-MM (``evaluation.cragmm.cruise``), which adds the image
summary, the retrieval and the turn budget between them: each step takes the pending
``Item``s and finishes those it decides (``run_steps``); every model call's latency is added to
its item's ``seconds``. A conversation's earlier turns (``Item.history``) go before the
question in the answering calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import pyarrow as pa

from mmcurate.core.config import Settings
from mmcurate.core.text import content_tokens
from mmcurate.gating import prompts
from mmcurate.models.labels import Label, ask_labels, ask_parsed, first_token_label, label_request
from mmcurate.models.requests import ChatRequest

SYSTEM_NAME = "verify-first"
IDK = "I don't know"
STAGE = "evaluate"
YES_NO = ("yes", "no")
ROUTER = "verify.router.v2"  # one call, both flags (v1 asked each flag in its own call)
CONSISTENCY = "verify.consistency.v1"
COV = "verify.cov.v1"
TEMPLATES = (ROUTER, CONSISTENCY, COV)
COV_MAX_TOKENS = 160  # the confidence comes first, so a cut-off reasoning still leaves it readable
ROUTER_MAX_TOKENS = 24  # two short lines

# The router (3.1; appendix A.1 asks both in one prompt): one reply, two labelled lines.
ROUTER_FLAGS = (("needs_outside_knowledge", "OUTSIDE KNOWLEDGE"), ("time_sensitive", "TIME-SENSITIVE"))
ROUTER_SYSTEM = "You sort questions about an image. Follow the reply format exactly."
ROUTER_ASK = (
    "Decide two things about this question.\n"
    "1. Does answering it need knowledge beyond what the image itself shows (names, dates, numbers, "
    "facts about the world)?\n"
    "2. Is it time-sensitive: does it ask about today, the latest or current events, or anything whose "
    "answer changes over time?\n"
    "Reply in exactly two lines, yes or no on each:\nOUTSIDE KNOWLEDGE: yes or no\nTIME-SENSITIVE: yes or no"
)
ROUTER_REMINDER = (
    "Your reply could not be read. Reply in exactly two lines:\nOUTSIDE KNOWLEDGE: yes or no\nTIME-SENSITIVE: yes or no"
)
CONSISTENCY_SYSTEM = "You are an impartial judge. Reply with exactly one word: yes or no."
COV_SYSTEM = "You are a verification expert. Follow the output format strictly."
COV_ASK = (
    "Check whether the proposed answer is correct and supported by the image and the evidence. "
    "If the answer needs outside knowledge (a name, a date, a number) that is neither in the "
    "evidence nor visible in the image, your confidence is 0.0. First a holistic check: is the "
    "answer accurate for the image, consistent with the evidence, free of contradictions, on the "
    "question and specific enough? If it fails, your confidence is at most 0.5. Otherwise split "
    "the question into sub-questions and check the answer against each. Confidence scale: 1.0 "
    "certainly correct, 0.9 very confident, 0.7 some doubt, 0.5 serious doubt, 0.25 probably "
    "wrong, 0.0 certainly wrong.\n"
    "Reply in exactly this format, the confidence on the first line:\n"
    "CONFIDENCE: <a number from 0.0 to 1.0>\nREASONING: <one or two sentences>\n"
    "SUB-QUESTIONS: Q1: <sub-question>, Finding: <Supported or Unsupported>, ..."
)
YES_NO_REMINDER = "Your reply could not be read. Reply with exactly one word: yes or no."
COV_REMINDER = "Your reply could not be read. Start with one line exactly like 'CONFIDENCE: 0.8', then the rest."
_CONFIDENCE = re.compile(r"confidence\s*:\s*(\d+(?:\.\d+)?|\.\d+)", re.IGNORECASE)
_ROUTER_LINES = [re.compile(rf"(?:\d[.)]\s*)?{name}\s*:\s*(yes|no)\.?", re.IGNORECASE) for _, name in ROUTER_FLAGS]

ANSWERS = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("answer", pa.string()),  # the final answer (IDK when abstaining); None: the answering call failed
        pa.field("error", pa.string()),  # why the answering call failed
        pa.field("abstained", pa.bool_()),
        pa.field("reason", pa.string()),  # why it answered or abstained
        pa.field("gate_error", pa.string()),  # a check that could not be read (the system abstained)
        pa.field("trace", pa.string(), nullable=False),  # JSON: every check that ran, its reply, the decision
    ]
)
TAU_RET = 0.5  # our tau_ret (the paper names it without a value): the reranker's even odds
LEXICAL = "lexical"  # the offline verifier stand-in (module docstring)
RetrievalGate = Literal["score", "context"]


@dataclass(frozen=True)
class VerifyFirst:
    """The system's settings: the answering model (which also judges and verifies, as in
    CRUISE), the router model, the two confidence thresholds and Algorithm 1's retrieval test."""

    model: str
    router: str | None = None  # None: the answering model routes too
    abstention: str = prompts.DEFAULT_ABSTENTION  # the answering prompt's abstention instruction
    with_context: float = 0.9  # tau_low
    without_context: float = 1.0  # tau_high
    tau_ret: float = TAU_RET
    retrieval_gate: RetrievalGate = "score"  # S_ret < tau_ret (Algorithm 1), or "context": C is empty
    verifier: str | None = None  # who checks: None the answering model, a model name, or LEXICAL

    @property
    def router_model(self) -> str:
        return self.router or self.model

    @property
    def verifier_model(self) -> str:
        return self.verifier or self.model


def lexical_consistent(first: str, second: str, question: str) -> bool:
    """The lexical stand-in's consistency: the two answers share a content word the question does
    not already hold (they say the same new thing)."""
    asked = content_tokens(question)
    return bool((content_tokens(first) - asked) & (content_tokens(second) - asked))


def lexical_confidence(answer: str, context: Sequence[Mapping[str, Any]], question: str) -> float:
    """The lexical stand-in's confidence: the share of the answer's content words beyond the
    question's that the evidence holds (0.0 without evidence)."""
    words = content_tokens(answer) - content_tokens(question)
    shown = content_tokens(" ".join(f"{c.get('title') or ''} {c.get('text') or ''}" for c in context))
    return round(len(words & shown) / len(words), 2) if words and shown else 0.0


def weak_retrieval(
    time_sensitive: bool,
    has_context: bool,
    retrieval_score: float | None = None,
    tau_ret: float = TAU_RET,
    reading: RetrievalGate = "score",
) -> str | None:
    """Algorithm 1's first line: why a time-sensitive question's retrieval is too weak to answer
    from, or None (see the module docstring, step 2)."""
    if not time_sensitive:
        return None
    if reading == "score" and retrieval_score is not None:
        if retrieval_score < tau_ret:
            return f"time-sensitive question and retrieval score {retrieval_score:g} below tau_ret {tau_ret:g}"
        return None
    return None if has_context else "time-sensitive question and no retrieved context"


def gate(
    time_sensitive: bool,
    has_context: bool,
    consistent: bool,
    confidence: float,
    with_context: float = 0.9,
    without_context: float = 1.0,
    retrieval_score: float | None = None,
    tau_ret: float = TAU_RET,
    reading: RetrievalGate = "score",
) -> tuple[bool, str]:
    """Algorithm 1's decision: (answer?, why)."""
    weak = weak_retrieval(time_sensitive, has_context, retrieval_score, tau_ret, reading)
    if weak:
        return False, weak
    if not consistent:
        return False, "the answers with and without context disagree"
    threshold, where = (with_context, "with context") if has_context else (without_context, "without context")
    if confidence < threshold:
        return False, f"confidence {confidence:g} below {threshold:g} ({where})"
    return True, f"consistent, confidence {confidence:g} >= {threshold:g} ({where})"


def parse_confidence(text: str) -> float | None:
    """The confidence on the reply's first line (``CONFIDENCE: 0.9``, markdown emphasis
    tolerated), if it is a number in [0, 1]; else None."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return None
    match = _CONFIDENCE.fullmatch(lines[0].strip().replace("*", "").replace("_", "").strip())
    if match is None:
        return None
    value = float(match.group(1))
    return value if 0.0 <= value <= 1.0 else None


@dataclass
class Item:
    """One question on its way through the steps."""

    key: str
    row: Mapping[str, Any]  # question, images, sample_id
    available: list[dict[str, Any]]  # the evidence a scenario gives (verify-first)
    history: list[tuple[str, str]] = field(default_factory=list)  # earlier turns: (question, answer given)
    trace: dict[str, Any] = field(default_factory=dict)
    needs_retrieval: bool = False
    time_sensitive: bool = False
    context: list[dict[str, Any]] = field(default_factory=list)
    retrieval_score: float | None = None  # S_ret; None: the evidence was given, not retrieved
    answers: tuple[str | None, str | None] = (None, None)
    seconds: float = 0.0  # time spent on this question so far (model latencies, local work)
    done: dict[str, Any] | None = None  # the output row, once decided

    def finish(
        self,
        answer: str | None,
        reason: str,
        abstained: bool | None,
        error: str | None = None,
        gate_error: str | None = None,
    ) -> None:
        self.trace.update(
            decision="abstain" if abstained else ("answer" if abstained is False else "failed"), reason=reason
        )
        self.done = {
            "key": self.key,
            "sample_id": self.row["sample_id"],
            "answer": answer,
            "error": error,
            "abstained": abstained,
            "reason": reason,
            "gate_error": gate_error,
            "trace": json.dumps(self.trace, ensure_ascii=False, sort_keys=True),
        }

    def abstain(self, reason: str, gate_error: str | None = None) -> None:
        self.finish(IDK, reason, True, gate_error=gate_error)

    def checked(self, check: str, trace_key: str, label: Label, unreadable: str) -> bool:
        """Record the label a ``check`` gave (time, trace under ``trace_key``); when it could not
        be read, abstain for the reason ``unreadable``. Whether it was read."""
        self.seconds += label.seconds
        self.trace["checks"].append(check)
        self.trace[trace_key] = _label_trace(label)
        if not label.ok:
            self.abstain(unreadable, f"{check}: {label.error}")
        return label.ok


Step = Callable[[list[Item], Any, VerifyFirst, str], None]


def _label_trace(label: Label) -> dict[str, Any]:
    out: dict[str, Any] = {"label": label.label, "raw": label.raw}
    if label.score is not None:
        out["score"] = label.score
    if label.error:
        out["error"] = label.error
    return out


def _parts(item: Item, text: str, with_evidence: bool) -> list[dict]:
    parts = prompts.evidence_parts(item.context) if with_evidence else []
    parts += [{"type": "image", "sha256": sha} for sha in item.row["images"]]
    return [*parts, {"type": "text", "text": text}]


def _yes_no(response: Any) -> tuple[str, float] | None:
    return first_token_label(response, YES_NO)


def parse_router(text: str) -> tuple[str, str] | None:
    """The router's two flags from its reply: the first two non-empty lines must be
    ``OUTSIDE KNOWLEDGE: yes|no`` and ``TIME-SENSITIVE: yes|no`` in that order (a list number
    and markdown emphasis tolerated); else None."""
    lines = [line.replace("*", "").replace("_", " ").strip() for line in text.strip().splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    external, realtime = (pattern.fullmatch(line) for pattern, line in zip(_ROUTER_LINES, lines))
    if external is None or realtime is None:
        return None
    return external.group(1).lower(), realtime.group(1).lower()


def route(items: list[Item], pool: Any, system: VerifyFirst, stage: str) -> None:
    """The router's two flags from one call (unreadable: abstain, naming the check)."""
    asks = [
        ChatRequest(
            f"{i.key}/router",
            [
                {"role": "system", "content": ROUTER_SYSTEM},
                {"role": "user", "content": f"Question: {i.row['question'].strip()}\n{ROUTER_ASK}"},
            ],
            ROUTER,
            max_tokens=ROUTER_MAX_TOKENS,
        )
        for i in items
    ]
    labels = ask_parsed(
        pool.client(system.router_model),
        asks,
        parse_router,
        ROUTER_REMINDER,
        stage,
        "two lines 'OUTSIDE KNOWLEDGE: yes|no' and 'TIME-SENSITIVE: yes|no'",
    )
    for item, label in zip(items, labels):
        item.seconds += label.seconds
        item.trace["checks"] = ["router"]
        flags = label.label or (None, None)
        item.trace["router"] = {
            "model": system.router_model,
            **{name: _label_trace(Label(flag, label.raw, label.error)) for (name, _), flag in zip(ROUTER_FLAGS, flags)},
        }
        if not label.ok:
            item.abstain("router flags could not be read", f"router: {label.error}")
            continue
        item.needs_retrieval, item.time_sensitive = (flag == "yes" for flag in flags)


def given_evidence(items: list[Item], pool: Any, system: VerifyFirst, stage: str) -> None:
    """Verify-first's retrieval: the scenario's evidence when the router asks for outside
    knowledge, nothing otherwise; no retrieval score (the evidence was given, not ranked)."""
    for item in items:
        item.context = item.available if item.needs_retrieval else []
        item.trace["context"] = {
            "available": len(item.available),
            "used": len(item.context),
            "retrieval": "yes" if item.needs_retrieval else "skipped by the router",
        }


def retrieval_check(items: list[Item], pool: Any, system: VerifyFirst, stage: str) -> None:
    """Algorithm 1's first line, before any answer is asked."""
    for item in items:
        reading = system.retrieval_gate if item.retrieval_score is not None else "context"
        item.trace["retrieval_gate"] = {"reading": reading, "score": item.retrieval_score, "tau_ret": system.tau_ret}
        weak = weak_retrieval(
            item.time_sensitive, bool(item.context), item.retrieval_score, system.tau_ret, system.retrieval_gate
        )
        if weak:
            item.abstain(weak)


def answer(items: list[Item], pool: Any, system: VerifyFirst, stage: str) -> None:
    """Dual path: the answer with the context ``C`` and without any evidence section."""
    template = prompts.eval_template(system.abstention)
    requests = []
    for item in items:
        question, images, history = item.row["question"], item.row["images"], item.history
        requests.append(
            ChatRequest(
                f"{item.key}/with",
                prompts.build_messages(template, question, images, item.context, history),
                template.id,
            )
        )
        requests.append(
            ChatRequest(
                f"{item.key}/without", prompts.build_messages(template, question, images, None, history), template.id
            )
        )
    responses = pool.client(system.model).chat(requests, stage)
    for n, item in enumerate(items):
        with_ctx, without = responses[2 * n], responses[2 * n + 1]
        item.seconds += with_ctx.latency + without.latency
        item.trace["checks"].append("answers")
        item.trace["answers"] = {"with_context": with_ctx.text, "without_context": without.text}
        failed = next((r for r in (with_ctx, without) if r.text is None), None)
        if failed is not None:
            item.finish(None, "an answering call failed", None, error=failed.error)
        else:
            item.answers = (with_ctx.text, without.text)


def consistency(items: list[Item], pool: Any, system: VerifyFirst, stage: str) -> None:
    if system.verifier == LEXICAL:
        agree = [lexical_consistent(i.answers[1] or "", i.answers[0] or "", i.row["question"]) for i in items]
        labels = [
            Label(
                "yes" if ok else "no",
                [f"{LEXICAL}: {'a' if ok else 'no'} shared content word beyond the question's"],
                None,
            )
            for ok in agree
        ]
    else:
        labels = _judged_consistent(items, pool, system, stage)
    for item, label in zip(items, labels):
        if (
            item.checked("consistency", "consistency", label, "the consistency judge could not be read")
            and label.label == "no"
        ):
            item.abstain(gate(False, bool(item.context), False, 1.0)[1])


def _judged_consistent(items: list[Item], pool: Any, system: VerifyFirst, stage: str) -> list[Label]:
    asks = [
        label_request(
            f"{i.key}/consistent",
            CONSISTENCY_SYSTEM,
            _parts(
                i,
                (
                    f"Question: {i.row['question'].strip()}\nProposed answer 1: {i.answers[1]}\nProposed answer 2: {i.answers[0]}\n"
                    "Are the two answers consistent with each other and with the evidence and the image given? "
                    "Reply with exactly one word: yes or no."
                ),
                bool(i.context),
            ),
            CONSISTENCY,
        )
        for i in items
    ]
    return ask_labels(pool.client(system.verifier_model), asks, YES_NO, YES_NO_REMINDER, stage, _yes_no)


def verify(items: list[Item], pool: Any, system: VerifyFirst, stage: str) -> None:
    if system.verifier == LEXICAL:
        labels = [
            Label(
                lexical_confidence(i.answers[0] or "", i.context, i.row["question"]),
                [f"{LEXICAL}: share of the answer's new content words in the evidence"],
                None,
            )
            for i in items
        ]
    else:
        labels = _verified(items, pool, system, stage)
    for item, label in zip(items, labels):
        if not item.checked(
            "chain_of_verification", "confidence", label, "the verifier's confidence could not be read"
        ):
            continue
        answered, reason = gate(
            False, bool(item.context), True, label.label, system.with_context, system.without_context
        )
        item.trace["confidence"]["threshold"] = system.with_context if item.context else system.without_context
        if answered:
            item.finish(item.answers[0], reason, False)
        else:
            item.abstain(reason)


def _verified(items: list[Item], pool: Any, system: VerifyFirst, stage: str) -> list[Label]:
    asks = [
        ChatRequest(
            f"{i.key}/cov",
            [
                {"role": "system", "content": COV_SYSTEM},
                {
                    "role": "user",
                    "content": _parts(
                        i,
                        f"{COV_ASK}\n\nQuestion: {i.row['question'].strip()}\nProposed answer: {i.answers[0]}",
                        bool(i.context),
                    ),
                },
            ],
            COV,
            max_tokens=COV_MAX_TOKENS,
        )
        for i in items
    ]
    return ask_parsed(
        pool.client(system.verifier_model),
        asks,
        parse_confidence,
        COV_REMINDER,
        stage,
        "a first line 'CONFIDENCE: <0.0-1.0>'",
    )


System = TypeVar("System", bound=VerifyFirst)


def run_steps(
    items: list[Item],
    steps: Sequence[Callable[[list[Item], Any, System, str], None]],
    pool: Any,
    system: System,
    stage: str,
    after: Callable[[str, list[Item]], None] | None = None,
) -> None:
    """Each step on the items still undecided (one batch per model, cache first); ``after(step
    name, those items)`` runs after each step (CRUISE's budget check)."""
    for step in steps:
        pending = [item for item in items if item.done is None]
        if pending:
            step(pending, pool, system, stage)
            if after is not None:
                after(step.__name__, [item for item in pending if item.done is None])


def answers_table(items: Sequence[Item]) -> pa.Table:
    return pa.Table.from_pylist([item.done for item in items], schema=ANSWERS)


VERIFY_FIRST_STEPS: tuple[Step, ...] = (route, given_evidence, retrieval_check, answer, consistency, verify)


def verify_first_answers(
    rows: Sequence[Mapping[str, Any]],
    contexts: Sequence[Sequence[Mapping[str, Any]] | None],
    pool: Any,  # models.client.ModelPool
    system: VerifyFirst,
    keys: Sequence[str] | None = None,
    stage: str = STAGE,
) -> pa.Table:
    """The system's answer to each row (``question``, ``images``, ``sample_id``) given the
    evidence ``contexts[i]`` it may use: ``ANSWERS`` rows in input order, keyed ``keys[i]``
    (default the sample id). Each step is one batch per model, cache first."""
    if len(contexts) != len(rows) or (keys is not None and len(keys) != len(rows)):
        raise ValueError("verify_first_answers needs one context list (and one key) per row")
    prompts.eval_template(system.abstention)  # a bad level fails before any call
    items = [
        Item(keys[n] if keys is not None else row["sample_id"], row, [dict(c) for c in contexts[n] or []])
        for n, row in enumerate(rows)
    ]
    try:
        run_steps(items, VERIFY_FIRST_STEPS, pool, system, stage)
    finally:
        for model in {system.model, system.router_model, system.verifier_model} - {LEXICAL}:
            pool.release(model)
    return answers_table(items)


def verify_first_notes(settings: Settings, model: str, router: str | None, verifier: str | None) -> list[str]:
    """Who routed and who checked in a verify-first run (``router``, ``verifier``: the config's
    ``evaluation.verify_first``), each stand-in named."""
    notes = []
    for role, name in (("router", router or model), ("verifier", verifier or model)):
        if name == LEXICAL:
            notes.append(
                "verifier: the lexical stand-in (consistent when the two answers share a content word the "
                "question does not hold; confidence = the share of the answer's content words beyond the "
                "question's found in the evidence shown, 0.0 without evidence) checks in place of a model "
                "that can verify."
            )
            continue
        spec = settings.model(name)
        if spec.backend == "scripted" and spec.script is not None:  # a scripted model names its rules
            notes.append(f"{role}: scripted model {name!r} (rules in {spec.script.name}) stands in for a real model.")
        elif name != model:
            notes.append(f"{role}: {name}.")
    return notes
