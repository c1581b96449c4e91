"""Great Expectations suites per benchmark, run on the tables of a written release.

``validate_release`` writes ``quality/validation.json`` (results and failures) and the
Data Docs HTML site ``quality/data_docs/``, then refreshes ``quality/checksums.json``.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import great_expectations as gx
import great_expectations.expectations as gxe
import pandas as pd
from great_expectations.data_context.types.base import ProgressBarsConfig

from mmcurate.annotation.reflectv.formatting import MULTI, SINGLE
from mmcurate.annotation.reflectv.turns import RULES as TURN_RULES
from mmcurate.core.domains import DOMAINS

from . import quality_frames as qf
from . import reflectv_frames as rf
from .manifest import QUALITY_DIR, VALIDATION_FILE, record_artifacts, write_json
from .reflectv import FATES
from .reader import Release, open_release

DATA_DOCS_DIR = f"{QUALITY_DIR}/data_docs"


@dataclass
class FrameCheck:
    """One frame, the column that identifies its rows, and the expectations on it."""

    name: str
    frame: pd.DataFrame
    id_column: str | None
    expectations: list[Any]


@dataclass
class ValidationOutcome:
    success: bool
    failures: list[str]
    notes: list[str] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)


def _columns_rule(columns: list[str], derived: list[str]) -> Any:
    """The release table has exactly ``columns`` (the frame adds the ``derived`` ones)."""
    return gxe.ExpectTableColumnsToMatchSet(column_set=columns + derived, exact_match=True)


def _non_empty(column: str) -> Any:
    return gxe.ExpectColumnValuesToBeBetween(column=column, min_value=1)


def _sample_rules(columns: list[str], derived: list[str], non_empty: tuple[str, str]) -> list[Any]:
    """What every table of samples must hold: its exact columns, unique non-null ids, a
    question and an answer, and images that decode."""
    return [
        _columns_rule(columns, derived),
        gxe.ExpectColumnValuesToBeUnique(column="sample_id"),
        gxe.ExpectColumnValuesToNotBeNull(column="sample_id"),
        *(_non_empty(column) for column in non_empty),
        gxe.ExpectColumnValuesToBeInSet(column="images_decode", value_set=[True]),
    ]


def deflection_checks(release: Release) -> tuple[list[FrameCheck], list[str]]:
    manifest = release.manifest
    frame = qf.deflection_frame(release.batches("test"))
    notes: list[str] = []
    rules = [
        *_sample_rules(qf.DEFLECTION_COLUMNS, qf.DEFLECTION_DERIVED, ("question_chars", "n_answers")),
        gxe.ExpectColumnValuesToBeInSet(column="gold_in_negatives", value_set=[False]),
        gxe.ExpectColumnValuesToBeBetween(column="n_duplicate_contexts", min_value=0, max_value=0),
        gxe.ExpectColumnValuesToNotBeNull(column="shuffle_seed"),
        gxe.ExpectColumnValuesToBeInSet(column="shuffle_seed", value_set=[int(manifest["seed"])]),
    ]
    if manifest.get("k_min") is not None:
        rules.append(gxe.ExpectColumnValuesToBeBetween(column="n_negatives", min_value=int(manifest["k_min"])))
    else:
        notes.append("k_min not set: minimum-negatives check skipped")
    checks = [FrameCheck("test", frame, "sample_id", rules)]
    bounds = ((manifest.get("config") or {}).get("deflectionbench") or {}).get("source_mix") or {}
    if bounds:
        mix = qf.source_mix_frame(frame["source"].tolist(), {k: tuple(v) for k, v in bounds.items()})
        checks.append(FrameCheck("source_mix", mix, "source", [
            gxe.ExpectColumnValuesToBeInSet(column="in_bounds", value_set=[True]),
        ]))
    else:
        notes.append("deflectionbench.source_mix not configured: source-mix check skipped")
    return checks, notes


def reflvqa_checks(release: Release) -> tuple[list[FrameCheck], list[str]]:
    documents = release.table("documents")
    qa = qf.qa_frame(release.table("qa"), documents)
    docs = qf.documents_frame(documents)
    kb = qf.documents_frame(release.table("knowledge_base"))
    checks = [
        FrameCheck("qa", qa, "sample_id", [
            *_sample_rules(qf.QA_COLUMNS, qf.QA_DERIVED, ("question_chars", "answer_chars")),
            gxe.ExpectColumnValuesToBeBetween(column="n_missing_cited_docs", min_value=0, max_value=0),
            gxe.ExpectColumnValuesToBeBetween(column="n_unsupported_sentences", min_value=0, max_value=0),
        ]),
    ]
    for name, frame, columns in (("documents", docs, qf.DOCUMENT_COLUMNS), ("knowledge_base", kb, qf.KB_COLUMNS)):
        checks.append(FrameCheck(name, frame, "doc_id", [
            _columns_rule(columns, qf.DOCUMENT_DERIVED),
            gxe.ExpectColumnValuesToBeUnique(column="doc_id"),
            gxe.ExpectColumnValuesToBeInSet(column="modality", value_set=["text", "image"]),
            gxe.ExpectColumnValuesToBeInSet(column="images_decode", value_set=[True]),
        ]))
    return checks, []


def reflectv_checks(release: Release) -> tuple[list[FrameCheck], list[str]]:
    """The turn-format validator's rules as expectations (``turns_breaking_<rule>`` = 0), plus
    the share of multi-turn chains against rho and the dialogues' scores."""
    trajectories = release.table("trajectories")
    frame = rf.trajectory_frame(trajectories)
    rho = float(((release.manifest.get("config") or {}).get("reflectv") or {}).get("rho", 0.75))
    rules = [
        *_sample_rules(trajectories.column_names, rf.TRAJECTORY_DERIVED, ("question_chars", "n_answers")),
        gxe.ExpectColumnValuesToBeInSet(column="format", value_set=[MULTI, SINGLE]),
        gxe.ExpectColumnValuesToBeInSet(column="domain", value_set=list(DOMAINS)),
        gxe.ExpectColumnValuesToBeBetween(column="n_turns", min_value=1),
        gxe.ExpectColumnValuesToBeInSet(column="turns_match_format", value_set=[True]),
        gxe.ExpectColumnValuesToBeInSet(column="first_turn_original", value_set=[True]),
        *(gxe.ExpectColumnValuesToBeBetween(column=f"turns_breaking_{rule}", min_value=0, max_value=0)
          for rule in TURN_RULES),
    ]
    dialogues = release.table("dialogues")
    return [
        FrameCheck("trajectories", frame, "sample_id", rules),
        FrameCheck("composition", rf.composition_frame(trajectories, rho), None, [
            gxe.ExpectColumnValuesToBeInSet(column="meets_rho", value_set=[True])]),
        FrameCheck("dialogues", rf.dialogue_frame(dialogues), "sample_id", [
            _columns_rule(dialogues.column_names, rf.DIALOGUE_DERIVED),
            gxe.ExpectColumnValuesToBeUnique(column="sample_id"),
            gxe.ExpectColumnValuesToBeInSet(column="fate", value_set=list(FATES)),
            gxe.ExpectColumnValuesToBeInSet(column="n_scores_match_depth", value_set=[True]),
            gxe.ExpectColumnValuesToBeBetween(column="min_score", min_value=0, max_value=10),
            gxe.ExpectColumnValuesToBeBetween(column="max_score", min_value=0, max_value=10),
            gxe.ExpectColumnValuesToBeInSet(column="images_decode", value_set=[True]),
        ]),
    ], []


CHECKS = {"deflectionbench": deflection_checks, "reflvqa": reflvqa_checks, "reflectv": reflectv_checks}


def _context():
    """A fresh in-memory GE context per validation: Data Docs builds render every suite
    and result a context holds, so a shared context would grow slower with each release."""
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return context


def _describe_failure(check: FrameCheck, result: Any) -> str:
    """One line: frame, expectation and its arguments, and which rows failed (by id)."""
    config = result.expectation_config
    kwargs = {k: v for k, v in config.kwargs.items() if k not in ("batch_id", "result_format", "column_set")}
    args = ", ".join(f"{k}={v}" for k, v in kwargs.items())
    detail = result.result or {}
    if "unexpected_count" in detail:
        what = f"{detail['unexpected_count']} row(s) failed"
        indices = detail.get("unexpected_index_list") or []
        ids = [i.get(check.id_column) if isinstance(i, dict) else i for i in indices[:5]]
        if ids:
            what += f": {check.id_column} {ids}"
    else:
        what = f"observed {json.dumps(detail.get('observed_value'), default=str)[:300]}"
    return f"{check.name}: {config.type}({args}): {what}"


def run_checks(name: str, checks: list[FrameCheck], docs_dir: Path | None) -> ValidationOutcome:
    """Run every frame's suite through a GE checkpoint; build Data Docs into ``docs_dir``."""
    context = _context()
    run = uuid.uuid4().hex[:8]
    failures: list[str] = []
    results: dict[str, Any] = {}
    for check in checks:
        key = f"{name}.{check.name}.{run}"
        asset = context.data_sources.add_pandas(name=key).add_dataframe_asset(name=check.name)
        batch = asset.add_batch_definition_whole_dataframe("whole")
        suite = context.suites.add(gx.ExpectationSuite(name=key, expectations=check.expectations))
        definition = context.validation_definitions.add(gx.ValidationDefinition(name=key, data=batch, suite=suite))
        result_format: dict[str, Any] = {"result_format": "COMPLETE"}
        if check.id_column:
            result_format["unexpected_index_column_names"] = [check.id_column]
        checkpoint = context.checkpoints.add(gx.Checkpoint(
            name=key, validation_definitions=[definition], result_format=result_format
        ))
        outcome = checkpoint.run(batch_parameters={"dataframe": check.frame})
        for suite_result in outcome.run_results.values():
            results[check.name] = suite_result.to_json_dict()
            failures += [_describe_failure(check, r) for r in suite_result.results if not r.success]
    if docs_dir is not None:
        site = f"{name}-{run}"
        context.add_data_docs_site(site_name=site, site_config={
            "class_name": "SiteBuilder",
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs_dir.resolve())},
        })
        context.build_data_docs(site_names=[site])
    return ValidationOutcome(success=not failures, failures=failures, results=results)


def validate_release(path: Path | str) -> ValidationOutcome:
    """Validate the release at ``path`` and write its ``quality/`` folder."""
    release = open_release(path)
    checks, notes = CHECKS[release.benchmark](release)
    docs_dir = release.path / DATA_DOCS_DIR
    outcome = run_checks(f"{release.benchmark}-{release.version}", checks, docs_dir)
    outcome.notes = notes
    write_json(release.path / VALIDATION_FILE, {
        "benchmark": release.benchmark,
        "version": release.version,
        "success": outcome.success,
        "validated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "great_expectations": gx.__version__,
        "failures": outcome.failures,
        "notes": notes,
        "results": outcome.results,
    })
    record_artifacts(release.path)
    return outcome
