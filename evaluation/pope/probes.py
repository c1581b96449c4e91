"""POPE's evaluation (seed 000 4.1-4.2; POPE's ``evaluate.py``): one vision model answers every
probe of a release, ``plain`` (the question with the image) or through ``kestrel``
(``evaluation.pope.kestrel``: grounded, verified, evidence-gated self-refinement).

Reading a plain reply (POPE's ``evaluate.py``, github.com/RUCAIBox/POPE at 3df3ba1): its
first sentence (up to the first "."), commas removed, split on spaces: "no" when a word is
``No``, ``no`` or ``not``, else "yes". That rule reads a reply holding none of those words,
and no ``Yes`` or ``yes`` either, as "yes" by default; the table counts exactly those replies
by the rule's own words, case-sensitive, so a leading "NO", "No\n..." (no space after it) or
"Not really." is counted. Kestrel's answers are exactly Yes or No.

Metrics per (dataset, split), as POPE reports each dataset's random / popular / adversarial
apart (Kestrel's Table 1: MS-COCO, A-OKVQA, GQA), and over all of POPE's probes (the ``all``
row; MME's probes, read by another rule, stay out of it and have their own score), "yes" the positive class
(the same file): TP, FP, TN, FN; accuracy (TP + TN) / n; precision TP / (TP + FP); recall
TP / (TP + FN); F1; yes ratio, the share answered "yes". A metric whose denominator is 0 is
left empty. A Kestrel run adds the transitions of Figure 4 from its initial to its final
answers (kept correct, corrected, broken, kept wrong) per (dataset, split) and how many items
reached each round (Table 3's checked cases).

MME's hallucination subtasks (dataset ``mme``, the subtask as the split; ``sources.mme``) are
read by MME's rule instead of POPE's, and scored by MME's score beside the table
(``evaluation.pope.mme``: accuracy + accuracy+ per subtask, their sum; a Kestrel run beside its
initial answers). Kestrel asks an MME probe's claim of its subtask's type (existence, count,
position, colour); a POPE probe's by the question's wording.

``answers.parquet``, one row per probe: ``sample_id``, ``dataset``, ``split``,
``question_id``, ``object``, ``image_file``, ``label``, ``system``, ``reply`` (the plain
reply), ``answer`` (yes / no, MME's ``other`` for a reply its rule cannot read, null when the
item failed), ``grade`` (CORRECT / INCORRECT / FAILED), ``error``; for Kestrel also
``initial``, ``rounds``, ``stopped``, ``changed`` and ``trace`` (JSON; ``mmcurate why RUN
SAMPLE`` prints it).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from mmcurate.annotation.grounders import Grounder, Sam2Segmenter, make_grounder
from mmcurate.benchmarks import register_part
from mmcurate.benchmarks.pope import KestrelConfig, PopeEvalConfig
from mmcurate.core.config import Settings
from mmcurate.core.errors import MmcurateError
from mmcurate.core.ids import sha256_file
from mmcurate.core.markdown import markdown_table
from mmcurate.core.specs import Boxes
from mmcurate.core.stages import StageContext
from mmcurate.core.tables import write_table
from mmcurate.judging.claim_extraction import heuristic_type
from mmcurate.models.requests import ChatRequest
from mmcurate.models.stand_ins import stand_in_note
from mmcurate.sources.mme import PROBE_SPLITS
from mmcurate.sources.pope import dataset_splits

from ..failures import EvaluationError
from ..runs import PLAIN
from . import mme
from .kestrel import Kestrel, KestrelItem

KESTREL = "kestrel"
SYSTEMS = (PLAIN, KESTREL)
FAILED = "FAILED"
PLAIN_TEMPLATE = "pope.plain.v1"
PLAIN_MAX_TOKENS = 32
TRANSITIONS = ("kept correct", "corrected", "broken", "kept wrong")  # Figure 4, initial -> final
ANSWERS = pa.schema(
    [
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("split", pa.string(), nullable=False),
        pa.field("question_id", pa.int64(), nullable=False),
        pa.field("object", pa.string()),
        pa.field("image_file", pa.string(), nullable=False),
        pa.field("question", pa.string(), nullable=False),
        pa.field("label", pa.string(), nullable=False),
        pa.field("system", pa.string(), nullable=False),
        pa.field("reply", pa.string()),
        pa.field("answer", pa.string()),
        pa.field("grade", pa.string(), nullable=False),
        pa.field("error", pa.string()),
        pa.field("initial", pa.string()),
        pa.field("rounds", pa.int32()),
        pa.field("stopped", pa.string()),
        pa.field("changed", pa.bool_()),
        pa.field("trace", pa.string()),
    ]
)
ANSWERS_FILE = "answers.parquet"
CELL = ("dataset", "split")  # what a run's rows are keyed by in its folder (``evaluation.runs``)


ORACLE_TITLE = "oracle grounding (upper bound)"


@register_part("pope", "evaluation_check")
def run_options(given: dict[str, Any]) -> dict[str, Any]:
    """The POPE evaluation's options, checked before any flow starts."""
    system = given.get("system") or PLAIN
    if system not in SYSTEMS:
        raise MmcurateError(f"--system {system!r}: POPE runs {' or '.join(SYSTEMS)}")
    oracle = bool(given.get("oracle_grounding"))
    if oracle and system != KESTREL:
        raise MmcurateError("--oracle-grounding: only --system kestrel grounds")
    return {"system": system, "oracle_grounding": oracle}


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def oracle_source(files: list[Path], release: Any) -> str | None:  # release: releases.reader.Release
    """Why a grounder reading ``files`` grounds from the probes' own source annotations (issue:
    a grounder that reads the boxes the labels were built from measures the annotations, not
    the system): a file inside a source root of the release or beside one of its source files,
    or a copy of a source file (same sha256); None when it reads none of them."""
    entries = release.manifest.source_files
    places = [(release.path / e.path).resolve().parent for e in entries if e.path]
    section = release.manifest.config.get(release.benchmark) or {}
    places += [(release.path / s["root"]).resolve() for s in section.get("sources") or [] if s.get("root")]
    digests = {e.sha256 for e in entries}
    for file in files:
        where = file.resolve()
        folder = next((p for p in places if _inside(where, p)), None)
        if folder is not None:
            return f"{file} lies in {folder}, a source the probes were built from"
        if where.is_file() and sha256_file(str(where)) in digests:
            return f"{file} is a copy of a source file the probes were built from"
    return None


def refuse_oracle_grounding(settings: Settings, release: Any, allowed: bool) -> bool:  # releases.reader.Release
    """Whether Kestrel's configured grounder reads the probes' own annotations (then the run is an
    upper bound, titled ``ORACLE_TITLE``); refused, before any call, unless ``allowed``
    (``--oracle-grounding``)."""
    spec = PopeEvalConfig.of(settings).kestrel.grounding
    if spec is None:
        return False
    grounder = make_grounder(spec)
    why = oracle_source(getattr(grounder, "files", []), release)
    if why and not allowed:
        raise EvaluationError(
            f"grounding agent {grounder.name} reads the annotations the POPE labels come from "
            f"({why}): its answers would measure the labels; give --oracle-grounding to run it "
            "as an upper bound, or ground with a detector that does not read them"
        )
    return why is not None


@register_part("pope", "evaluation_refuse")
def refuse_unrunnable(settings: Settings, model: str, options: dict[str, Any]) -> None:
    """What the POPE evaluation cannot run with, said before any call: a model that cannot see,
    Kestrel without a grounding agent."""
    if not settings.model(model).vision:
        raise EvaluationError(f"POPE asks about images: model {model!r} cannot see them (vision: false)")
    if options["system"] == KESTREL and PopeEvalConfig.of(settings).kestrel.grounding is None:
        raise EvaluationError(
            "--system kestrel needs a grounding agent: set evaluation.pope.kestrel.grounding "
            "('boxes:<regions>' or 'pointing:<model>')"
        )


NO_WORDS = frozenset({"No", "no", "not"})  # what POPE's rule reads as "no"
YES_WORDS = frozenset({"Yes", "yes"})


def _rule_words(text: str) -> set[str]:
    """The words POPE's rule looks at: the first sentence, commas removed, split on spaces."""
    return set(text.split(".")[0].replace(",", "").split(" "))


def read_answer(text: str) -> str:
    """POPE's reading of a reply as yes or no (module docstring)."""
    return "no" if NO_WORDS & _rule_words(text) else "yes"


def read_by_default(text: str) -> bool:
    """Whether POPE's rule read ``text`` as "yes" only because its words hold neither a no-word
    nor ``Yes``/``yes`` (module docstring)."""
    return not (NO_WORDS | YES_WORDS) & _rule_words(text)


def plain_requests(probes: Sequence[Mapping[str, Any]]) -> list[ChatRequest]:
    return [
        ChatRequest(
            p["sample_id"],
            [
                {
                    "role": "user",
                    "content": [{"type": "image", "sha256": p["image"]}, {"type": "text", "text": p["question"]}],
                }
            ],
            PLAIN_TEMPLATE,
            max_tokens=PLAIN_MAX_TOKENS,
        )
        for p in probes
    ]


def answer_row(probe: dict[str, Any], system: str, answer: str | None, **extra: Any) -> dict[str, Any]:
    grade = FAILED if answer is None else "CORRECT" if answer == probe["label"] else "INCORRECT"
    return {
        "sample_id": probe["sample_id"],
        "dataset": probe["dataset"],
        "split": probe["split"],
        "question_id": probe["question_id"],
        "object": probe["object"],
        "image_file": probe.get("image_file") or probe["image"],  # releases before issue 33 hold no file name
        "question": probe["question"],
        "label": probe["label"],
        "system": system,
        "answer": answer,
        "grade": grade,
        **extra,
    }


def reader(probe: Mapping[str, Any]) -> Any:
    """How a plain reply to ``probe`` is read: MME's rule for MME's probes, POPE's for the rest."""
    return mme.read_reply if mme.is_mme(probe) else read_answer


def plain_answers(probes: list[dict[str, Any]], client: Any, stage: str = "pope") -> list[dict[str, Any]]:
    """Ask each probe once and read the reply by its benchmark's rule (a failed call: FAILED)."""
    responses = client.chat(plain_requests(probes), stage) if probes else []
    return [
        answer_row(p, PLAIN, reader(p)(r.text) if r.text is not None else None, reply=r.text, error=r.error)
        for p, r in zip(probes, responses)
    ]


def _ratio(a: int, b: int) -> float | None:
    return a / b if b else None


def groups(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The (dataset, split) pairs of ``rows`` in the release's order, then ("all", "all") when
    ``rows`` hold POPE probes (``in_group``)."""
    pooled = [("all", "all")] if any(not mme.is_mme(r) for r in rows) else []
    return [*dataset_splits(rows, PROBE_SPLITS), *pooled]


def in_group(row: dict[str, Any], dataset: str, split: str) -> bool:
    """Whether ``row`` counts in the (dataset, split) group: ("all", "all") pools POPE's probes
    only, MME's being read by another rule and scored by MME's score (``evaluation.pope.mme``)."""
    return not mme.is_mme(row) if dataset == "all" else (row["dataset"], row["split"]) == (dataset, split)


def metrics(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """POPE's metrics per (dataset, split), then over all POPE probes (failed items left out and counted)."""
    out = []
    for dataset, split in groups(rows):
        part = [r for r in rows if in_group(r, dataset, split)]
        done = [r for r in part if r["answer"] is not None]
        tp = sum(r["answer"] == "yes" and r["label"] == "yes" for r in done)
        fp = sum(r["answer"] == "yes" and r["label"] == "no" for r in done)
        tn = sum(r["answer"] == "no" and r["label"] == "no" for r in done)
        fn = sum(r["answer"] == "no" and r["label"] == "yes" for r in done)
        precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
        f1 = (
            None
            if precision is None or recall is None
            else 2 * precision * recall / (precision + recall)
            if precision + recall
            else 0.0
        )
        out.append(
            {
                "dataset": dataset,
                "split": split,
                "n": len(done),
                "failed": len(part) - len(done),
                "tp": tp,
                "fp": fp,
                "tn": tn,
                "fn": fn,
                "accuracy": _ratio(tp + tn, len(done)),
                "precision": precision,
                "recall": recall,
                "f1": f1,
                "yes_ratio": _ratio(tp + fp, len(done)),
                "unread": sum(
                    r.get("reply") is not None and not mme.is_mme(r) and read_by_default(r["reply"]) for r in done
                ),
            }
        )
    return out


def transition(initial_correct: bool, final_correct: bool) -> str:
    if initial_correct:
        return "kept correct" if final_correct else "broken"
    return "corrected" if final_correct else "kept wrong"


def kestrel_tables(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Figure 4's transitions (initial -> final, per (dataset, split)) and the items that reached each round."""
    done = [r for r in rows if r["answer"] is not None and r["initial"] is not None]
    moves = []
    for dataset, split in groups(done):
        counts = Counter(
            transition(r["initial"].lower() == r["label"], r["grade"] == "CORRECT")
            for r in done
            if in_group(r, dataset, split)
        )
        for t in TRANSITIONS:
            moves.append(
                {
                    "dataset": dataset,
                    "split": split,
                    "transition": t,
                    "count": counts[t],
                    "share": _ratio(counts[t], sum(counts.values())),
                }
            )
    reached = Counter(n for r in done for n in range(1, (r["rounds"] or 0) + 1))
    stops = Counter(r["stopped"] for r in done)
    rounds: list[dict[str, Any]] = [{"round": n, "items": reached[n]} for n in sorted(reached)]
    rounds += [{"round": f"stopped: {s}", "items": stops[s]} for s in sorted(stops)]
    return moves, rounds


def _fmt(value: Any) -> str:
    return "–" if value is None else f"{100 * value:.2f}" if isinstance(value, float) else str(value)


def answers_table(rows: list[dict[str, Any]]) -> pa.Table:
    """The answer rows as ``answers.parquet`` holds them."""
    return pa.Table.from_pylist([{name: row.get(name) for name in ANSWERS.names} for row in rows], schema=ANSWERS)


def write_pope_evaluation(rows: list[dict[str, Any]], out: Path, title: str, notes: list[str]) -> str:
    """answers.parquet, metrics.parquet (and transitions.parquet for Kestrel), table.md; returns the markdown."""
    out.mkdir(parents=True, exist_ok=True)
    answers = answers_table(rows)
    full = answers.to_pylist()
    write_table(answers, out / ANSWERS_FILE)
    table = metrics(full)
    write_table(pa.Table.from_pylist(table), out / "metrics.parquet")
    shown = [
        {
            "Dataset": r["dataset"],
            "Split": r["split"],
            "n": str(r["n"]),
            **{k: _fmt(r[k]) for k in ("accuracy", "precision", "recall", "f1", "yes_ratio")},
        }
        for r in table
    ]
    text = [
        f"# {title}",
        "",
        markdown_table(shown, right=["n", "accuracy", "precision", "recall", "f1", "yes_ratio"]),
        "",
        "Accuracy, precision, recall, F1 and yes ratio in %, 'yes' the positive class (POPE's evaluate.py).",
    ]
    unread = sum(r["unread"] for r in table if r["dataset"] == "all")
    if unread:
        text.append(
            f"{unread} repl{'y' if unread == 1 else 'ies'} held none of POPE's words (No, no, not, Yes, yes "
            "in the first sentence, as written) and POPE's rule read them as 'yes'."
        )
    if any(mme.is_mme(r) for r in full) and any(not mme.is_mme(r) for r in full):
        text.append("The 'all' row pools POPE's probes only; MME's are scored by MME's score below.")
    kestrel = any(r["system"] == KESTREL for r in full)
    scores, section = mme.mme_section(full, kestrel)
    if scores:
        write_table(pa.Table.from_pylist(scores), out / "mme_scores.parquet")
        text += section
    if kestrel:
        moves, rounds = kestrel_tables(full)
        write_table(pa.Table.from_pylist(moves), out / "transitions.parquet")
        text += [
            "",
            "## Initial -> final answer (Figure 4)",
            "",
            markdown_table(
                [
                    {
                        "Dataset": m["dataset"],
                        "Split": m["split"],
                        "Transition": m["transition"],
                        "Count": str(m["count"]),
                        "Share (%)": _fmt(m["share"]),
                    }
                    for m in moves
                ],
                right=["Count", "Share (%)"],
            ),
            "",
            "## Rounds (Table 3's checked cases)",
            "",
            markdown_table([{"Round": str(r["round"]), "Items": str(r["items"])} for r in rounds], right=["Items"]),
        ]
    if notes:
        text += ["", *(f"- {note}" for note in notes)]
    markdown = "\n".join(text) + "\n"
    (out / "table.md").write_text(markdown, encoding="utf-8")
    return markdown


def failed_call(error: str | None) -> bool:
    """Whether an error is a model call that failed for good (not a reply that could not be read)."""
    return error is not None and error.split(": ", 1)[-1].startswith(("model call failed", "retry failed"))


def kestrel_row(probe: dict[str, Any], item: Any) -> dict[str, Any]:
    """An answers row of one Kestrel item (``evaluation.pope.kestrel.KestrelItem``): FAILED when a
    model call failed for good (the failure policy applies); an unreadable reply mid-loop keeps
    the answer reached, and the trace says why the loop stopped."""
    errors = [item.error, *(r.get("error") or r.get("refine_error") for r in item.trace.get("rounds", []))]
    error = next((e for e in errors if e), None)
    answer = None if item.answer is None or any(map(failed_call, errors)) else item.answer.lower()
    return answer_row(
        probe,
        KESTREL,
        answer,
        reply=None,
        error=error,
        initial=item.initial,
        rounds=len(item.rounds),
        stopped=item.stopped,
        changed=bool(item.initial and item.answer != item.initial),
        trace=json.dumps(item.trace, ensure_ascii=False),
    )


def pope_answers(
    probes: list[dict[str, Any]], ctx: StageContext, model: str, system: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """Every probe answered by ``model`` through ``system``; the rows and the notes naming what
    stood in for what (module docstring)."""
    refuse_unrunnable(ctx.settings, model, {"system": system})
    note = stand_in_note("evaluated model", ctx.settings.model(model), "a vision model", sees=True)
    notes = [note] if note else []
    if system == PLAIN:
        try:
            return plain_answers(probes, ctx.pool.client(model)), notes
        finally:
            ctx.pool.release(model)
    cfg = PopeEvalConfig.of(ctx.settings).kestrel
    assert cfg.grounding is not None  # refuse_unrunnable
    grounder = make_grounder(cfg.grounding)
    segmenter = Sam2Segmenter(cfg.segmenter) if cfg.segmenter is not None else None
    items = [
        KestrelItem(
            p["sample_id"],
            p["image"],
            p["question"],
            mme.claim_type(p) or heuristic_type(p["question"]),
            p["object"] or "object",
        )
        for p in probes
    ]
    Kestrel(ctx, model, cfg, grounder, segmenter).run(items)
    return [kestrel_row(p, item) for p, item in zip(probes, items)], notes + kestrel_notes(
        ctx.settings, model, cfg, grounder
    )


def kestrel_notes(settings: Settings, model: str, cfg: KestrelConfig, grounder: Grounder | None = None) -> list[str]:
    """What the run used in the paper's places, and the readings it chose."""
    verifier = cfg.verifier or model
    gate = cfg.gate
    described = getattr(grounder, "describe", None)
    notes = [
        f"Kestrel: grounding agent {cfg.grounding}"
        + (" (annotated regions stand in for SAM3)" if isinstance(cfg.grounding, Boxes) else "")
        + (f": {described()}" if described else "")
        + (f", masks by {cfg.segmenter}" if cfg.segmenter else "; no segmenter: overlays are boxes, not masks")
        + f"; verifier {verifier}"
        + (" (the model judges its own evidence, as in the paper)" if verifier == model else "")
        + f"; SAM3's thresholds (4.1): detection {cfg.detection_threshold:g}, existence recheck "
        + f"{cfg.recheck_threshold:g}, applied to the instances the grounder scores"
        + ("" if getattr(grounder, "scores", None) else " (this one scores none, so they leave nothing out)")
        + ".",
        f"Kestrel: at most {gate.max_rounds} rounds, stop after {gate.stable_rounds} supported rounds with the "
        f"answer unchanged or after a round with no stronger evidence than the one before (our reading of 3.4: "
        f"no evidence item it did not show, no claim checked more confidently); an answer changes only through the gate (thresholds "
        + ", ".join(f"{k} {v:g}" for k, v in gate.thresholds.items())
        + "); a contradiction does not stop the rounds.",
        f"Kestrel: Yes-guard {'on (the appendix option)' if cfg.yes_guard else 'off (the main text)'}.",
    ]
    note = stand_in_note("verifier", settings.model(verifier), "the verifier", sees=True) if verifier != model else None
    return notes + ([note] if note else [])
