"""CRUISE as its paper runs it on CRAG-MM (seed 001, section 3 and 2.3): one answer per turn.

For each turn, the verification-first steps (``evaluation.verify_first``) with CRUISE's
retrieval between the router and the answers:

1. router: needs outside knowledge? time-sensitive? (one call; no retrieval when the first is off);
2. query-aware image summary ``s = f(q, I)`` (eq. 1; appendix A.2's purpose in our words,
   ``SUMMARY_TEXTS``, or the texts of a user's template file, ``cruise.summary_prompt``) by the
   ``summariser`` (a vision model; default the answering model);
3. retrieval (``retrieval.cragmm_search``): recall with the image (eq. 3's image branch) and/or
   ``q' = q || s`` (eq. 2, the web branch), paragraph chunks, reranking against ``q'``, the MAD
   cutoff; ``S_ret`` the best reranked score (0 when the router skipped retrieval);
4. Algorithm 1: time-sensitive and ``S_ret < tau_ret`` -> "I don't know";
5. answers with and without ``C``, the consistency judge, the chain-of-verification
   confidence (0.9 with context, 1.0 without), else "I don't know".

The time budget (2.3: a 10-second timeout per conversational turn, a turn over it "considered a
failure"): a turn's time is the latency of each model call it made (its original latency when
the answer comes from the response cache, so a rerun decides alike) plus its local retrieval,
timed with an injected ``clock`` (a callable returning seconds), as if the turn's calls ran one
after another. After every step, a turn over ``turn_seconds`` is a failure: no answer
(``timed_out``, graded ``timed_out`` and counted as missing, never an "I don't know" answer), and
it asks nothing more; a turn whose answer arrived late is changed the same way. Later turns of
its conversation see "I don't know" as its answer (it gave none).

Multi-turn conversations (Task 3): turn ``t`` of every conversation is answered once turn
``t - 1`` of all of them is, with the earlier turns (question, the answer the system gave) as
messages before the question, as CRAG-MM's evaluator hands them to an agent. The ``plain``
system is the paper's "vision only" baseline: one answer from the model with the image and
the earlier turns, no retrieval, under the same budget, asked with no abstention instruction (it
"attempts to answer all questions", L274). Table 1's ablations: ``ABLATIONS``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from mmcurate.benchmarks import register_part
from mmcurate.benchmarks.cragmm import QUERY, CruiseConfig, SummaryPromptFile
from mmcurate.core.config import Settings
from mmcurate.core.errors import ConfigError, MmcurateError
from mmcurate.core.text import normalize
from mmcurate.gating import prompts
from mmcurate.judging.prejudge import is_refusal
from mmcurate.models.requests import ChatRequest
from mmcurate.models.stand_ins import stand_in_note
from mmcurate.retrieval.cragmm_search import Retriever

from ..runs import PLAIN
from ..verify_first import (
    ANSWERS,
    IDK,
    Item,
    Step,
    VerifyFirst,
    answer,
    consistency,
    retrieval_check,
    route,
    run_steps,
    verify,
)

SYSTEM_NAME = "cruise"
SYSTEMS = (PLAIN, SYSTEM_NAME)
# Table 1's ablation rows (seed 001, 4.2), as the paper reports them: without CoV the system answers
# less, not more (Table 1: missing 95.19 % for both rows against CRUISE's 82.69 %). The dual path and
# self-consistency leave it "overly conservative", answers "filtered out due to lack of full
# agreement or incomplete grounding" (3.4, L211); CoV's calibrated confidence is what lets such
# answers through (L227). So a removed check takes away a way in, not a gate (``ABLATION_READING``).
ABLATIONS = {
    "no-cov": "w/o CoV: no verifier confidence, so nothing admits an answer the evidence does not carry: the answer "
    "with context is returned when the context C is non-empty and the consistency judge finds the two "
    "answers consistent, else I don't know (no answer without context: only CoV's 1.0 admits one)",
    "no-cov-no-consistency": "w/o CoV & Self-Consistency: no judge either: the answer with context is returned only "
    "when C is non-empty and the two answers are the same after normalisation (full "
    "agreement), else I don't know",
    "rag-agent": "RAG Agent: the image summary, retrieval for every turn (no router) and the answer with "
    "context, returned unverified (no Algorithm 1)",
}
ABLATION_READING = (
    "a removed check takes away what admits an answer (seed 001 L211, L227; Table 1: w/o CoV "
    "answers less than CRUISE), it does not drop a gate of Algorithm 1"
)
TASKS = {"1": ("single_turn", "image"), "2": ("single_turn", "both"), "3": ("multi_turn", "both")}
# Eq. 1's request (appendix A.2's purpose, in our words; the paper's wording is loadable from a
# template file, ``cruise.summary_prompt``): {query} is the question.
SUMMARY_TEXTS = {
    "summary_system": "You describe photos briefly, picking out what bears on the question asked about them.",
    "summary_request": (
        "Question about this photo: '{query}'\nDescribe the photo in a single sentence: the "
        "objects, any writing and other details that could help answer the question."
    ),
}
SUMMARY = "cruise.summary.v2"
STAGE = "evaluate"
Clock = Callable[[], float]


@register_part("cragmm", "evaluation_check")
def run_options(given: dict[str, Any]) -> dict[str, Any]:
    """The options of a CRAG-MM evaluation (``system``: plain or cruise; ``ablation``: Table 1's
    rows beside CRUISE, repeatable; ``task``: 1, 2 or 3, or all turns; ``limit``: the first N
    conversations of each set), checked before any flow."""
    system = given.get("system") or PLAIN
    if system not in SYSTEMS:
        raise MmcurateError(f"unknown answering system {system!r} for CRAG-MM; known: {', '.join(SYSTEMS)}")
    ablations = list(dict.fromkeys(given.get("ablations") or []))
    unknown = [a for a in ablations if a not in ABLATIONS]
    if unknown:
        raise MmcurateError(f"unknown CRUISE ablation {unknown[0]!r}; known: {', '.join(ABLATIONS)}")
    if ablations and system != SYSTEM_NAME:
        raise MmcurateError("--ablation: Table 1's rows are CRUISE's; give --system cruise")
    task = given.get("task")
    if task is not None and str(task) not in TASKS:
        raise MmcurateError(f"unknown CRAG-MM task {task!r}; known: {', '.join(TASKS)} (or none: every turn)")
    limit = given.get("limit")
    if limit is not None and int(limit) < 1:
        raise MmcurateError(f"--limit must be at least 1 (the first N conversations of each set), got {limit}")
    return {
        "system": system,
        "ablations": ablations,
        "task": None if task is None else str(task),
        "limit": None if limit is None else int(limit),
    }


@register_part("cragmm", "evaluation_refuse")
def refuse_unrunnable(settings: Settings, model: str, options: dict[str, Any]) -> None:
    """What a CRAG-MM evaluation cannot run with, said before any call: CRUISE without its
    configuration section."""
    if options["system"] == SYSTEM_NAME and CruiseConfig.find(settings) is None:
        raise ConfigError("--system cruise needs a 'cruise' section in the config")


@dataclass(frozen=True)
class SummaryPrompt:
    """Eq. 1's prompt: its template id (the response-cache key), texts and where they came from."""

    id: str
    system: str
    request: str  # holds {query}
    source: str = "built-in (evaluation/cragmm/cruise.py)"

    def ask(self, question: str) -> str:
        return self.request.replace(QUERY, question)


BUILT_IN_SUMMARY = SummaryPrompt(SUMMARY, SUMMARY_TEXTS["summary_system"], SUMMARY_TEXTS["summary_request"])


def summary_prompt(spec: SummaryPromptFile | None) -> SummaryPrompt:
    """The built-in summary prompt, or a template file's texts over it (id
    ``cruise.summary.custom-<sha256[:12]>`` of the texts, so no cache entry is shared)."""
    if spec is None:
        return BUILT_IN_SUMMARY
    if spec.templates is None or spec.sha256 is None:
        raise MmcurateError(f"summary prompt {spec.file} was not read (load the config with load_config)")
    texts: dict[str, str] = {**SUMMARY_TEXTS, **spec.templates}  # type: ignore[dict-item]  # template names are str keys
    digest = hashlib.sha256(f"{texts['summary_system']}\x00{texts['summary_request']}".encode()).hexdigest()
    return SummaryPrompt(
        f"cruise.summary.custom-{digest[:12]}",
        texts["summary_system"],
        texts["summary_request"],
        f"{spec.file.name} (sha256 {spec.sha256})",
    )


@dataclass(frozen=True)
class Cruise(VerifyFirst):
    """CRUISE's settings: verify-first's, the summariser and its prompt, the turn budget (None: none)."""

    summariser: str | None = None  # None: the answering model
    summary_max_tokens: int = 64
    summary: SummaryPrompt = BUILT_IN_SUMMARY
    turn_seconds: float | None = 10.0

    @property
    def summariser_model(self) -> str:
        return self.summariser or self.model


CruiseStep = Callable[[list[Item], Any, Cruise, str], None]  # a step of CRUISE's (a verify-first step is one)


def summarise(items: list[Item], pool: Any, system: Cruise, stage: str) -> None:
    """Eq. 1 for the turns that retrieve: a one-sentence, query-aware summary of the image. A
    failed call leaves the summary empty (the retrieval query is then the question alone)."""
    wanted = [i for i in items if i.needs_retrieval]
    prompt = system.summary
    requests = [
        ChatRequest(
            f"{i.key}/summary",
            [
                {"role": "system", "content": prompt.system},
                {
                    "role": "user",
                    "content": [
                        *({"type": "image", "sha256": sha} for sha in i.row["images"]),
                        {"type": "text", "text": prompt.ask(i.row["question"].strip())},
                    ],
                },
            ],
            prompt.id,
            max_tokens=system.summary_max_tokens,
        )
        for i in wanted
    ]
    responses = pool.client(system.summariser_model).chat(requests, stage) if requests else []
    for item, response in zip(wanted, responses):
        item.seconds += response.latency
        item.trace["summary"] = {
            "model": system.summariser_model,
            "text": response.text,
            **({"error": response.error} if response.text is None else {}),
        }


def retrieval_step(retriever: Retriever, read_image: Callable[[str], bytes], clock: Clock) -> Step:
    """Step 3: each turn's retrieval, timed with ``clock``; the router's skip gives S_ret 0."""

    def retrieve(items: list[Item], pool: Any, system: VerifyFirst, stage: str) -> None:
        for item in items:
            if not item.needs_retrieval:
                item.context, item.retrieval_score = [], 0.0
                item.trace["context"] = {"retrieval": "skipped by the router", "used": 0}
                continue
            started = clock()
            image = read_image(item.row["images"][0]) if item.row["images"] else None
            found = retriever.retrieve(item.row["question"], (item.trace.get("summary") or {}).get("text"), image)
            item.seconds += clock() - started
            item.context, item.retrieval_score = found.context, found.score
            item.trace["context"] = {
                "retrieval": "yes",
                "used": len(found.context),
                "score": found.score,
                **found.detail,
            }

    return retrieve


def budget_check(limit: float | None) -> Callable[[str, list[Item]], None]:
    """After each step: a turn over ``limit`` seconds is a failure (seed 001, 2.3: "considered a
    failure"): no answer (``answer`` None, ``timed_out``), asks nothing more, and is graded
    ``timed_out`` (counted in missing and in its own column), never turned into "I don't know"."""

    def check(step: str, items: list[Item]) -> None:
        if limit is None:
            return
        for item in items:
            late = item.seconds > limit and not item.trace.get("timed_out")
            if late and (item.done is None or item.done["answer"] is not None):
                item.trace["timed_out"] = {"after": step, "seconds": round(item.seconds, 3), "limit": limit}
                item.finish(
                    None, f"over the {limit:g} s turn budget after {step} ({item.seconds:.2f} s): a failure", None
                )

    return check


# The vision-only baseline "attempts to answer all questions" (seed 001, L274): the evaluation's
# prompt without an abstention instruction (DeflectionBench's "decline rather than guess" is not its).
VISION_ONLY = prompts.eval_template("none")


def plain_answer(items: list[Item], pool: Any, system: VerifyFirst, stage: str) -> None:
    """The vision-only baseline: one answer with the image and the earlier turns."""
    template = VISION_ONLY
    responses = pool.client(system.model).chat(
        [
            ChatRequest(
                f"{i.key}/without",
                prompts.build_messages(template, i.row["question"], i.row["images"], None, i.history),
                template.id,
            )
            for i in items
        ],
        stage,
    )
    for item, response in zip(items, responses):
        item.seconds += response.latency
        item.trace["checks"] = ["answer"]
        if response.text is None:
            item.finish(None, "the answering call failed", None, error=response.error)
        else:
            item.finish(response.text, "plain answer", False)


def grounded_and_consistent(items: list[Item], pool: Any, system: VerifyFirst, stage: str) -> None:
    """w/o CoV's last step (after the consistency judge said yes): the answer with context when
    there is context; without it nothing vouches for the answer."""
    for item in items:
        if item.context:
            item.finish(item.answers[0], "consistent, with context (ablation no-cov: no verifier)", False)
        else:
            item.abstain("no context, and no verifier to vouch for an answer without it (ablation no-cov)")


def fully_agreed(items: list[Item], pool: Any, system: VerifyFirst, stage: str) -> None:
    """w/o CoV & Self-Consistency's last step: no judge compares the two answers, so only the
    same answer (``core.text.normalize``; not a refusal) with context goes through."""
    for item in items:
        with_context, without = (normalize(a or "") for a in item.answers)
        same = bool(with_context) and with_context == without and not is_refusal(with_context)
        if item.context and same:
            item.finish(
                item.answers[0],
                "the same answer with and without context, with context "
                "(ablation no-cov-no-consistency: no judge, no verifier)",
                False,
            )
        else:
            item.abstain(
                ("the answers with and without context differ" if not same else "no context")
                + " (ablation no-cov-no-consistency: no judge, no verifier)"
            )


def unverified(ablation: str) -> Step:
    """The last step of an ablation: the answer with context, as no check removed it."""

    def accept(items: list[Item], pool: Any, system: VerifyFirst, stage: str) -> None:
        for item in items:
            item.finish(item.answers[0], f"answer with context, unverified (ablation {ablation})", False)

    return accept


def retrieve_every_turn(items: list[Item], pool: Any, system: VerifyFirst, stage: str) -> None:
    """The RAG agent has no router: every turn retrieves."""
    for item in items:
        item.needs_retrieval = True
        item.trace["checks"] = []


def answer_with_context(items: list[Item], pool: Any, system: VerifyFirst, stage: str) -> None:
    """The RAG agent's one answer: with ``C`` (the very request of the dual path's first answer)."""
    template = prompts.eval_template(system.abstention)
    responses = pool.client(system.model).chat(
        [
            ChatRequest(
                f"{i.key}/with",
                prompts.build_messages(template, i.row["question"], i.row["images"], i.context, i.history),
                template.id,
            )
            for i in items
        ],
        stage,
    )
    for item, response in zip(items, responses):
        item.seconds += response.latency
        item.trace["checks"].append("answer")
        item.trace["answers"] = {"with_context": response.text}
        if response.text is None:
            item.finish(None, "the answering call failed", None, error=response.error)
        else:
            item.answers = (response.text, None)


def cruise_steps(
    system: str,
    retriever: Retriever | None,
    read_image: Callable[[str], bytes],
    clock: Clock,
    ablation: str | None = None,
) -> tuple[CruiseStep, ...]:
    """The steps of ``system`` (with one of ``ABLATIONS`` removing what Table 1's row removes)."""
    if system == PLAIN:
        return (plain_answer,)
    if retriever is None:
        raise MmcurateError("the cruise system needs a retriever (the config's cruise section)")
    retrieve = retrieval_step(retriever, read_image, clock)
    if ablation == "rag-agent":
        return (retrieve_every_turn, summarise, retrieve, answer_with_context, unverified(ablation))
    head = (route, summarise, retrieve, retrieval_check, answer)
    if ablation == "no-cov":
        return (*head, consistency, grounded_and_consistent)
    if ablation == "no-cov-no-consistency":
        return (*head, fully_agreed)
    return (*head, consistency, verify)


def variants(system: str, ablations: Sequence[str]) -> list[str]:
    """The rows a run answers: the system, then each ablation (CRUISE only)."""
    return [system, *ablations] if system == SYSTEM_NAME else [system]


TURNS = pa.schema(
    [
        *ANSWERS,
        pa.field("timed_out", pa.bool_(), nullable=False),
        pa.field("seconds", pa.float64(), nullable=False),
        pa.field("retrieval_score", pa.float64()),
        pa.field("n_context", pa.int32(), nullable=False),
    ]
)


def answer_conversations(
    turns: Sequence[Mapping[str, Any]],  # rows with sample_id, question, images, session_id, turn
    pool: Any,  # models.client.ModelPool
    system: Cruise,
    steps: Sequence[CruiseStep],
    stage: str = STAGE,
) -> pa.Table:
    """Every turn answered in conversation order (turn t after every turn t - 1), each with the
    earlier turns and the answers the system gave them in context: ``TURNS`` rows in input order."""
    prompts.eval_template(system.abstention)  # a bad level fails before any call
    items = [Item(row["sample_id"], row, []) for row in turns]
    given: dict[tuple[str, int], str] = {}  # (session, turn) -> the system's answer
    try:
        for depth in sorted({int(row["turn"]) for row in turns}):
            batch = [item for item in items if int(item.row["turn"]) == depth]
            for item in batch:
                session = item.row["session_id"]
                item.history = [
                    (prior.row["question"], given[(session, int(prior.row["turn"]))])
                    for prior in items
                    if prior.row["session_id"] == session and int(prior.row["turn"]) < depth
                ]
            run_steps(batch, steps, pool, system, stage, after=budget_check(system.turn_seconds))
            for item in batch:
                assert item.done is not None  # every step path ends in finish()
                given[(item.row["session_id"], depth)] = item.done["answer"] or IDK
    finally:
        for model in {system.model, system.router_model, system.summariser_model}:
            pool.release(model)
    rows = []
    for item in items:
        assert item.done is not None
        rows.append(
            {
                **item.done,
                "timed_out": bool(item.trace.get("timed_out")),
                "seconds": item.seconds,
                "retrieval_score": item.retrieval_score,
                "n_context": len(item.context),
                "trace": json.dumps(item.trace, ensure_ascii=False, sort_keys=True),
            }
        )
    return pa.Table.from_pylist(rows, schema=TURNS)


def answer_variants(
    turns: Sequence[Mapping[str, Any]],
    pool: Any,
    system: Cruise,
    name: str,
    ablations: Sequence[str],
    retriever: Retriever | None,
    read_image: Callable[[str], bytes],
    clock: Clock,
) -> pa.Table:
    """Every turn answered by the system ``name`` and by each of its ``ablations`` (Table 1's
    rows): ``TURNS`` rows after a ``variant`` column, one block per variant in that order."""
    tables = []
    for variant in variants(name, ablations):
        steps = cruise_steps(name, retriever, read_image, clock, None if variant == name else variant)
        table = answer_conversations(turns, pool, system, steps)
        tables.append(table.add_column(0, "variant", pa.array([variant] * table.num_rows, pa.string())))
    return pa.concat_tables(tables)


def default_clock() -> float:
    return time.perf_counter()


def cruise_system(settings: Settings, model: str) -> Cruise:
    """The system's settings from the config's ``cruise`` section (its defaults when absent)."""
    cfg = CruiseConfig.find(settings) or CruiseConfig.model_construct()
    return Cruise(
        model,
        router=cfg.router,
        with_context=cfg.tau_low,
        without_context=cfg.tau_high,
        tau_ret=cfg.tau_ret,
        retrieval_gate=cfg.retrieval_gate,
        summariser=cfg.summariser,
        summary_max_tokens=cfg.summary_max_tokens,
        summary=summary_prompt(cfg.summary_prompt),
        turn_seconds=cfg.turn_seconds,
    )


def search_branch(settings: Settings, task: str | None) -> str:
    """Eq. 3's branch: the task's (1: image, 2 and 3: image and web) or the config's."""
    return TASKS[task][1] if task else CruiseConfig.of(settings).search


def build_retriever(settings: Settings, task: str | None) -> Retriever:
    """CRUISE's retriever from the config's ``cruise`` section (see ``retrieval.cragmm_search``)."""
    from mmcurate.retrieval.cragmm_search import CragmmSearchPipeline, ImageKG, ProjectSearch, WebIndex
    from mmcurate.retrieval.encoders import image_encoder, text_encoder
    from mmcurate.retrieval.rerank import reranker

    cfg = CruiseConfig.find(settings)
    if cfg is None:
        raise MmcurateError("--system cruise needs a 'cruise' section in the config (its models, indexes, budget)")
    branch = search_branch(settings, task)
    if cfg.cragmm_search is not None:
        spec = cfg.cragmm_search
        search: Any = CragmmSearchPipeline.load(
            spec.image_model_name, spec.image_hf_dataset_id, spec.text_model_name, spec.web_hf_dataset_id, cfg.kg_fields
        )
    else:
        for needed, value, what in (("image", cfg.image_index, "image_index"), ("web", cfg.web_index, "web_index")):
            if branch in (needed, "both") and value is None:
                raise MmcurateError(f"CRAG-MM task {task} searches {needed}: set cruise.{what} in the config")
        index_dir = settings.workdir / "indexes"
        image_kg: ImageKG | None = None
        web: WebIndex | None = None
        if branch in ("image", "both") and cfg.image_index is not None:  # set: checked above
            image_kg = ImageKG(cfg.image_index, image_encoder(cfg.image_encoder), index_dir, cfg.kg_fields)
        if branch in ("web", "both") and cfg.web_index is not None:  # set: checked above
            web = WebIndex(cfg.web_index, text_encoder(cfg.text_encoder), index_dir)
        search = ProjectSearch(image_kg, web)
    built = Retriever(search, reranker(cfg.reranker), cfg.cutoff, branch, cfg.k_recall)
    built.warm()
    return built


def select_turns(rows: Sequence[Mapping[str, Any]], task: str | None, limit: int | None) -> list[Mapping[str, Any]]:
    """The turns a run answers: the task's set (all turns without a task), the first ``limit``
    conversations of each set, in conversation and turn order."""
    wanted = TASKS[task][0] if task else None
    kept: dict[str, list[str]] = {}
    out = []
    for row in sorted(rows, key=lambda r: (r["set"], r["session_id"], r["turn"])):
        if wanted and row["set"] != wanted:
            continue
        sessions = kept.setdefault(row["set"], [])
        if row["session_id"] not in sessions:
            if limit is not None and len(sessions) >= limit:
                continue
            sessions.append(row["session_id"])
        out.append(row)
    return out


def stand_in_notes(
    settings: Settings, model: str, system: str, components: Mapping[str, str], ablations: Sequence[str] = ()
) -> list[str]:
    """One line per stand-in and per reading this run used (named in every output)."""
    notes = []
    names = [("answering model", model)]
    if system == SYSTEM_NAME:
        cfg = CruiseConfig.of(settings)
        names += [("router", cfg.router or model), ("summariser", cfg.summariser or model)]
    for role, name in names:
        note = stand_in_note(role, settings.model(name), "the paper's Llama 3.2 models", sees=True)
        notes += [note] if note else []
    notes += [f"ablation {ablation}: {ABLATIONS[ablation]}." for ablation in ablations]
    if ablations:
        notes.append(f"Table 1's rows: the paper names them only; our reading: {ABLATION_READING}.")
    if system == SYSTEM_NAME:
        cfg = CruiseConfig.of(settings)
        notes.append(
            f"retrieval: {components.get('search')} ({components.get('search_branch')} branch of eq. 3), "
            f"reranked by {components.get('reranker')}, cutoff {components.get('cutoff')}"
            + (
                " (a bi-encoder stands in for bge-reranker-v2-m3)"
                if components.get("reranker", "").startswith("bi-encoder")
                else ""
            )
            + "."
        )
        summary = summary_prompt(cfg.summary_prompt)
        notes.append(f"image summary (eq. 1): prompt {summary.id}, {summary.source}.")
        notes.append(
            f"Algorithm 1: time-sensitive questions need S_ret >= tau_ret {cfg.tau_ret:g} "
            f"(reading '{cfg.retrieval_gate}'); confidence >= {cfg.tau_low:g} with context, "
            f">= {cfg.tau_high:g} without."
        )
    cruise = CruiseConfig.find(settings)
    budget = cruise.turn_seconds if cruise else 10.0
    notes.append("per-turn budget: " + ("none" if budget is None else f"{budget:g} s (model latencies + local work)"))
    return notes
