"""A ReflectV run as a release draft: trajectories, every dialogue with its fate, the numbers
of the paper's Figure 5 (domains, funnel, depth), and a training export.

Configs:

- ``trajectories`` (the training set, split ``train``): one row per released sample, the
  original image and the conversation as a list of turns ``{turn, image, text}``, each
  ``text`` in the ``<answer>/<think>/<tool_call>`` format and each ``image`` the image that
  turn sees (the original, then the previous turn's marked image); ``depth`` is the number of
  reflective rounds (Figure 5c: the turns that call the tool; 0 for a QA pair);
- ``dialogues``: every dialogue that was built or ingested, with its scores, student
  answers and teacher feedback, and its fate: ``multi_turn`` or ``single_turn`` (released),
  ``discarded`` (failed the trajectory filter) or ``dropped`` (surplus for rho, or a format
  defect), with the reason, and ``chain_issue``: why a later stage rejected its multi-turn
  chain, if one did; ``trajectory``: the dialogue rendered in the trajectory format as far as
  the pipeline built it (its reflections and marked images where they exist), the one form
  Table 6's quality check shows raters for every subset.

The training export (``releases.reflectv.sft``): ``sft/`` with the trajectories as
conversation records for fine-tuning tools, and their images.

Statistics: ``funnel`` (original -> response-filtered -> GT-filtered -> visually verified
chains -> released), ``domains`` (the same per domain, and the released formats),
``depth`` (released samples by reflective rounds, per format), ``composition`` (rho
asked and reached) and ``calls``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mmcurate.annotation.reflectv.chains import ORIGIN, turns_of
from mmcurate.annotation.reflectv.formatting import (
    CHECK_SHARE,
    FORMAT_DEFECTS,
    MULTI,
    REDUNDANT,
    SINGLE,
    SURPLUS,
    TRAJECTORY,
    final_think,
    render_turns,
)
from mmcurate.annotation.reflectv.trajectory import CHECK_ASCENDING, CHECK_FINAL, CHECK_RULE
from mmcurate.benchmarks import register_part
from mmcurate.benchmarks.reflectv import ReflectVConfig
from mmcurate.core.config import Settings
from mmcurate.core.domains import DOMAINS, domain_of
from mmcurate.core.images import ImageStore
from mmcurate.core.ledger import Ledger
from mmcurate.core.specs import Heuristic, Template
from mmcurate.core.stages import StageResult
from mmcurate.core.tables import SpilledTable
from mmcurate.evaluation.reflectv.harness import harness as lmms_harness
from mmcurate.models.stand_ins import stand_in_note
from mmcurate.sources.ingest import IngestResult

from ..draft import ReleaseDraft
from ..kind import Distribution, ReleaseKind
from ..near_duplicates import near_duplicates
from ..plots import sorted_counts, value_counts
from ..reader import LEDGER_FILE, Release
from .checks import reflectv_checks
from .schema import DIALOGUE, DISCARDED, DROPPED
from .sft import write_sft


def distributions(tables: Mapping[str, pa.Table]) -> dict[str, Distribution]:
    released = tables["trajectories"]
    return {
        "samples per domain": ("domain", "samples", dict(value_counts(released.column("domain")).most_common())),
        "trajectory depth (reflective rounds)": (
            "reflective rounds",
            "trajectories",
            sorted_counts(value_counts(released.column("depth"))),
        ),
    }


KIND = ReleaseKind(
    benchmark="reflectv",
    pretty="ReflectV",
    description=(
        "ReflectV is a training set of reflective, visually grounded trajectories curated as MIRROR describes: "
        "a student model answers, a teacher scores and corrects, only dialogues that improve steadily to a right "
        "answer are kept, the teacher's feedback becomes a first-person reflection that points at marks drawn on "
        "the image, and a verifier checks the marks."
    ),
    configs=("trajectories", "dialogues"),
    checks=reflectv_checks,
    distributions=distributions,
    split="train",
    exports=write_sft,
    harness=lmms_harness,
)
register_part("reflectv", "release")(KIND)


def _reasons(result: StageResult, check: str) -> dict[str, str]:
    """sample id -> the ``reason`` of its last ``check`` row in a stage's ledger."""
    ledger = result.ledger()
    reasons: dict[str, str] = {}
    for row in ledger.filter(pc.equal(ledger.column("check"), check)).to_pylist():
        reasons[row["sample_id"]] = json.loads(row["detail"] or "{}").get("reason", "")
    return reasons


def dialogue_table(
    dialogues: StageResult, filtered: StageResult, verified: StageResult, formatted: StageResult, seed: int
) -> pa.Table:
    """Every dialogue with its fate and its rendered trajectory (see the module docstring)."""
    passed = set(filtered.kept.column("sample_id").to_pylist())
    released = dict(zip(formatted.kept.column("sample_id").to_pylist(), formatted.kept.column("format").to_pylist()))
    issues = dict(zip(verified.kept.column("sample_id").to_pylist(), verified.kept.column("chain_issue").to_pylist()))
    built = dict(zip(verified.kept.column("sample_id").to_pylist(), turns_of(verified.kept)))
    discarded = _reasons(filtered, CHECK_RULE)
    share = _reasons(formatted, CHECK_SHARE)
    rows = []
    assert not isinstance(
        dialogues.kept, SpilledTable
    )  # ReflectV's stages run in memory (flows/reflectv.py: run_stage without rows)
    for row, turns, origin in zip(
        dialogues.kept.to_pylist(), turns_of(dialogues.kept), dialogues.kept.column(ORIGIN).to_pylist()
    ):
        sid = row["sample_id"]
        issue = issues.get(sid)
        if sid not in passed:
            fate, reason = DISCARDED, discarded.get(sid)
        elif sid in released:
            fate = released[sid]
            reason = None if fate == MULTI else issue or share.get(sid)
            if issue is None and (reason or "").startswith(FORMAT_DEFECTS):  # its chain broke the turn format
                issue = reason
        else:
            fate, reason = DROPPED, SURPLUS if share.get(sid) == SURPLUS else FORMAT_DEFECTS
        trajectory = render_turns(row["images"][0], built.get(sid, turns), final_think(seed, sid))
        rows.append(
            {
                "sample_id": sid,
                "source": row["source"],
                "source_id": row["source_id"],
                "domain": domain_of(row["meta"]),
                "question": row["question"],
                "answers": row["answers"],
                "image": row["images"][0],
                "origin": origin,
                "student_turns": len(turns),
                "dialogue": [{k: t[k] for k in ("answer", "score", "feedback")} for t in turns],
                "trajectory": trajectory,
                "fate": fate,
                "reason": reason,
                "chain_issue": issue,
            }
        )
    return pa.Table.from_pylist(rows, schema=DIALOGUE)


def figure5(
    dialogues: pa.Table, filtered: StageResult, verified: StageResult, trajectories: pa.Table
) -> dict[str, list[dict[str, Any]]]:
    """The funnel, domain and depth tables (the paper's Figure 5 a-c)."""
    rows = dialogues.to_pylist()
    score_ok = {sid for sid, ok in _score_checks(filtered).items() if ok}
    gt_ok = set(filtered.kept.column("sample_id").to_pylist())
    chains = {
        sid
        for sid, issue, turns in zip(
            verified.kept.column("sample_id").to_pylist(),
            verified.kept.column("chain_issue").to_pylist(),
            turns_of(verified.kept),
        )
        if issue is None and len(turns) >= 2
    }
    released = trajectories.to_pylist()
    funnel = [
        {"stage": "original (dialogues)", "remaining": len(rows)},
        {"stage": "response-filtered (ascending, ends at 10)", "remaining": len(score_ok)},
        {"stage": "GT-filtered (final answer agrees with the ground truth)", "remaining": len(gt_ok)},
        {"stage": "visually verified chains", "remaining": len(chains)},
        {"stage": "released (multi-turn + single-turn)", "remaining": len(released)},
    ]
    domains = []
    for domain in DOMAINS:
        ids = {r["sample_id"] for r in rows if r["domain"] == domain}
        out = [r for r in released if r["domain"] == domain]
        if not ids:
            continue
        domains.append(
            {
                "domain": domain,
                "original": len(ids),
                "response_filtered": len(ids & score_ok),
                "gt_filtered": len(ids & gt_ok),
                "verified_chains": len(ids & chains),
                "multi_turn": sum(r["format"] == MULTI for r in out),
                "single_turn": sum(r["format"] == SINGLE for r in out),
                "released": len(out),
            }
        )
    depth_counts = Counter((r["depth"], r["format"]) for r in released)
    depth = [
        {"depth": d, "multi_turn": depth_counts.get((d, MULTI), 0), "single_turn": depth_counts.get((d, SINGLE), 0)}
        for d in sorted({r["depth"] for r in released})
    ]
    return {"funnel": funnel, "domains": domains, "depth": depth}


def _score_checks(filtered: StageResult) -> dict[str, bool]:
    """sample id -> passed both score rules (ascending and final 10)."""
    ledger = filtered.ledger()
    ok: dict[str, bool] = {}
    for row in ledger.to_pylist():
        if row["check"] in (CHECK_ASCENDING, CHECK_FINAL):
            ok[row["sample_id"]] = ok.get(row["sample_id"], True) and row["verdict"] == "pass"
    return ok


def reflectv_draft(
    settings: Settings,
    version: str,
    run_id: str,
    ingested: list[IngestResult],
    samples: pa.Table,
    quarantine: pa.Table,
    stages: list[StageResult],
    parent: str | None = None,
) -> ReleaseDraft:
    """``stages``: dialogue, trajectory, reflection, grounding, visual and format results, in order,
    then the near-duplicate check (``annotation.dedup``) when it ran."""
    cfg = ReflectVConfig.of(settings)
    dialogues, filtered, reflected, grounded, verified, formatted = stages[:6]
    assert not isinstance(
        stages[-1].kept, SpilledTable
    )  # ReflectV's stages run in memory (flows/reflectv.py: run_stage without rows)
    trajectories = stages[-1].kept.cast(TRAJECTORY)
    dialogue_rows = dialogue_table(dialogues, filtered, verified, formatted, cfg.seed)
    duplicates = {
        r["sample_id"]: json.loads(r["detail"])["reason"]
        for s in stages[6:]
        for r in s.ledger().to_pylist()
        if r["verdict"] == "drop"
    }
    if duplicates:  # dropped by the near-duplicate check after formatting
        dialogue_rows = pa.Table.from_pylist(
            [
                {**r, "fate": DROPPED, "reason": duplicates[r["sample_id"]]} if r["sample_id"] in duplicates else r
                for r in dialogue_rows.to_pylist()
            ],
            schema=DIALOGUE,
        )
    tables = {"trajectories": trajectories, "dialogues": dialogue_rows}
    statistics = figure5(tables["dialogues"], filtered, verified, trajectories)
    multi = sum(f == MULTI for f in trajectories.column("format").to_pylist())
    statistics["composition"] = [
        {
            "rho": cfg.rho,
            "rho_rule": cfg.rho_rule,
            "multi_turn": multi,
            "single_turn": trajectories.num_rows - multi,
            "share": round(multi / trajectories.num_rows, 4) if trajectories.num_rows else None,
        }
    ]
    statistics["calls"] = [
        {
            "stage": s.stage,
            "step": r["stage"],
            "model": r["model"],
            "calls": r["calls"],
            "cache_hits": r["cache_hits"],
            "failures": r["failures"],
        }
        for s in stages
        for r in s.calls
    ]
    models = [{"role": role, **settings.model(name).identity()} for role, name in settings.roles("reflectv")]
    components: dict[str, str] = {}
    for stage in stages:
        components.update(stage.components)
    per_source = {r.source: {"ingested": r.samples, "quarantined": r.quarantined} for r in ingested}
    for row in trajectories.to_pylist():
        per_source[row["source"]]["released"] = per_source[row["source"]].get("released", 0) + 1
    statistics["readings"] = readings_table(settings)
    notes = stand_in_notes(settings, components)
    statistics.update(near_duplicates(stages, notes))
    return ReleaseDraft(
        kind=KIND,
        version=version,
        parent=parent,
        tables=tables,
        ledger=sum((s.decision_log() for s in stages), Ledger()),
        quarantine=quarantine,
        config=settings.resolved(),
        models=models,
        judge={"name": filtered.extra.get("judge", "none")},
        components=components,
        source_files=sorted({f for r in ingested for f in r.source_files}),
        counts={
            "per_stage": {s.stage: s.counts for s in stages},
            "per_source": per_source,
            "ingested": samples.num_rows,
            "run_id": run_id,
        },
        statistics=statistics,
        seed=cfg.seed,
        notes=notes,
    )


def stand_in_notes(settings: Settings, components: dict[str, str]) -> list[str]:
    """One line for every stand-in that took the place of a model the paper uses."""
    cfg = ReflectVConfig.of(settings)
    notes = []
    for role, name in settings.roles("reflectv"):
        note = stand_in_note(role, settings.model(name), "the paper's larger model") if role != "judge" else None
        notes += [note] if note else []
    if isinstance(cfg.keywords, Heuristic):
        notes.append(
            "keywords: a rule stands in for the keyword model (feedback content words for General QA, "
            "the question without question words for the other domains)."
        )
    grounding = components.get("grounding", "")
    if grounding.startswith("boxes:"):
        notes.append("grounding: annotated regions shipped with the images stand in for a pointing model.")
    elif grounding.startswith("saliency"):
        notes.append("grounding: a keyword-blind saliency locator stands in for a pointing model.")
    if settings.judge.kind == "lexical":
        notes.append("ground-truth check: the lexical judge (token containment) stands in for an LLM judge.")
    if cfg.segmenter is None:
        notes.append("no SAM 2 segmenter configured: masks are drawn as the ellipse of each located box.")
    if isinstance(cfg.captions, Template):
        notes.append("captions: fixed sentences (template-v1) stand in for the caption-insertion model (Figure 11).")
    return notes


RHO_TEXT = {
    "collapse": "rho is reached by collapsing redundant chains only (002 section 4.5); with fewer chains "
    "than rho asks for, every QA pair stays and the share is below rho",
    "collapse_or_drop": "surplus chains collapse, and with too few chains surplus QA pairs are dropped, "
    "so the share never falls below rho",
}
ORDER_TEXT = {
    "before_rewrite": "the caption and marks go into the teacher's feedback, which is then rewritten in "
    "the first person (Figures 11 then 12)",
    "after_rewrite": "the feedback is rewritten in the first person first, then the caption and marks go "
    "into the rewrite",
}


def readings_table(settings: Settings) -> list[dict]:
    """The readings of the paper this release was made with, where the paper leaves a choice or
    the project offers another: the card's "Readings" table (setting, value, reading)."""
    cfg = ReflectVConfig.of(settings)
    leak = (
        "collapsed to QA pairs"
        if cfg.collapse_revealing_feedback
        else "kept, and their caption insertion and rewrite must leave the answer out (Figure 11 forbids showing "
        "the ground truth); a turn that still states it fails the validator"
    )
    return [
        {
            "setting": "collapse_revealing_feedback",
            "value": str(cfg.collapse_revealing_feedback).lower(),
            "reading": f"chains whose teacher feedback states the answer are {leak}",
        },
        {"setting": "rho_rule", "value": f"{cfg.rho_rule} (rho {cfg.rho})", "reading": RHO_TEXT[cfg.rho_rule]},
        {
            "setting": "dense-perception keywords",
            "value": "question phrase",
            "reading": "Scene text, Document and Chart keywords are the question's subject phrase (Figure 9) and never "
            "state the ground truth (Figure 11); the ground truth places their marks (002 section 4.3)",
        },
        {"setting": "caption_order", "value": cfg.caption_order, "reading": ORDER_TEXT[cfg.caption_order]},
        {
            "setting": "depth",
            "value": "reflective rounds",
            "reading": "depth (Figure 5c) counts the turns that call the tool (a QA pair has 0)",
        },
    ]


def _sha(image: Any, store: ImageStore) -> Any:
    return store.put(image["bytes"]) if isinstance(image, dict) else image


def trajectory_samples(parent: Release, store: ImageStore) -> pa.Table:
    """A ReflectV release's trajectories with every image (the original, each turn's) back in ``store``."""
    rows = []
    for row in parent.table("trajectories").to_pylist():
        rows.append(
            {
                **row,
                "image": _sha(row["image"], store),
                "conversation": [{**turn, "image": _sha(turn["image"], store)} for turn in row["conversation"]],
            }
        )
    return pa.Table.from_pylist(rows, schema=TRAJECTORY)


def released_dialogues(parent: Release) -> dict[str, list[dict[str, Any]]]:
    """sample_id -> the turns {answer, score, feedback} of each dialogue the release holds."""
    return {
        row["sample_id"]: row["dialogue"]
        for row in parent.table("dialogues").select(["sample_id", "dialogue"]).to_pylist()
    }


def reflectv_recuration_draft(
    settings: Settings,
    version: str,
    run_id: str,
    parent: Release,
    parent_record: dict[str, str],
    recheck: StageResult,
    dedup: StageResult,
    store: ImageStore,
) -> ReleaseDraft:
    """A re-curation of ``parent`` by ``recheck`` (``annotation.reflectv.recheck``) and the
    near-duplicate check after it: its trajectories, the parent's dialogues with the fates the
    re-check changed, Figure 5's depth and domains again."""
    trajectories = dedup.kept
    assert not isinstance(
        trajectories, SpilledTable
    )  # ReflectV's stages run in memory (flows/reflectv.py: run_stage without rows)
    released = {r["sample_id"]: r["format"] for r in trajectories.select(["sample_id", "format"]).to_pylist()}
    collapsed = recheck.extra["collapsed"]
    removed = {
        **recheck.extra["removed"],
        **{
            r["sample_id"]: json.loads(r["detail"])["reason"]
            for r in dedup.ledger().to_pylist()
            if r["verdict"] == "drop"
        },
    }
    dialogues = []
    for row in parent.table("dialogues").to_pylist():
        sid = row["sample_id"]
        row["image"] = _sha(row["image"], store)
        row["trajectory"] = [{**turn, "image": _sha(turn["image"], store)} for turn in row["trajectory"]]
        if sid in removed:
            row.update(fate=DROPPED if removed[sid] == SURPLUS else DISCARDED, reason=f"{version}: {removed[sid]}")
        elif sid in released and released[sid] != row["fate"]:
            issue = collapsed.get(sid) or REDUNDANT
            row.update(fate=released[sid], reason=f"{version}: {issue}", chain_issue=f"{version}: {issue}")
        dialogues.append(row)
    m = parent.manifest
    rows = trajectories.to_pylist()
    multi = sum(r["format"] == MULTI for r in rows)
    funnel = [
        *(m.statistics.get("funnel") or []),
        {"stage": f"re-checked ({version}: {', '.join(recheck.components.values())})", "remaining": len(rows)},
    ]
    depth_counts = Counter((r["depth"], r["format"]) for r in rows)
    statistics = {
        "funnel": funnel,
        "domains": [
            {
                "domain": d,
                "multi_turn": sum(r["format"] == MULTI for r in rows if r["domain"] == d),
                "single_turn": sum(r["format"] == SINGLE for r in rows if r["domain"] == d),
                "released": sum(r["domain"] == d for r in rows),
            }
            for d in DOMAINS
            if any(r["domain"] == d for r in rows)
        ],
        "depth": [
            {"depth": d, "multi_turn": depth_counts.get((d, MULTI), 0), "single_turn": depth_counts.get((d, SINGLE), 0)}
            for d in sorted({r["depth"] for r in rows})
        ],
        "composition": [
            {
                "rho": ReflectVConfig.of(settings).rho,
                "rho_rule": ReflectVConfig.of(settings).rho_rule,
                "multi_turn": multi,
                "single_turn": len(rows) - multi,
                "share": round(multi / len(rows), 4) if rows else None,
            }
        ],
        "readings": readings_table(settings),
        "calls": [
            {
                "stage": recheck.stage,
                "step": r["stage"],
                "model": r["model"],
                "calls": r["calls"],
                "cache_hits": r["cache_hits"],
                "failures": r["failures"],
            }
            for r in recheck.calls
        ],
    }
    notes = [
        *m.notes,
        f"Re-curated from {parent.version}: re-checked by "
        f"{', '.join(recheck.components.values())}; the original teacher and verifier were not asked again.",
    ]
    statistics.update(near_duplicates([recheck, dedup], notes))
    counts = {**m.counts.recorded(), "run_id": run_id, "recheck": recheck.counts}
    counts.pop("rows", None)
    counts.pop("bytes", None)
    per_source = {
        source: {k: v for k, v in entry.items() if k != "released"}
        for source, entry in (counts.get("per_source") or {}).items()
    }
    for row in rows:  # what this version releases, per source (verify checks it against the data)
        per_source.setdefault(row["source"], {})["released"] = per_source[row["source"]].get("released", 0) + 1
    counts["per_source"] = per_source
    return ReleaseDraft(
        kind=KIND,
        version=version,
        parent=parent_record,
        tables={"trajectories": trajectories, "dialogues": pa.Table.from_pylist(dialogues, schema=DIALOGUE)},
        ledger=Ledger([parent.path / LEDGER_FILE]) + recheck.decision_log() + dedup.decision_log(),
        quarantine=parent.quarantine,
        config=settings.resolved(),
        models=[{"role": role, **settings.model(name).identity()} for role, name in settings.roles("reflectv")],
        judge=m.judge.recorded() if m.judge else {"name": "none"},
        components={**m.components, **recheck.components},
        source_files=[entry.recorded() for entry in m.source_files],
        counts=counts,
        statistics=statistics,
        seed=ReflectVConfig.of(settings).seed,
        notes=notes,
    )
