"""Great Expectations, run on the tables of a written release: each benchmark's suite
(``ReleaseKind.checks``, in ``releases/<benchmark>_checks.py``) lists frames and the
expectations on them; this module runs them through checkpoints.

``validate_release`` writes ``quality/validation.json`` (results and failures) and the
Data Docs HTML site ``quality/data_docs/``, then refreshes ``quality/checksums.json``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import great_expectations as gx
import great_expectations.expectations as gxe
from great_expectations.data_context.types.base import ProgressBarsConfig

from mmcurate.core.plural import counted

from .errors import ReleaseError
from .kind import FrameCheck, ReleaseKind
from .manifest import QUALITY_DIR, VALIDATION_FILE, record_artifacts, write_json
from .reader import open_release

DATA_DOCS_DIR = f"{QUALITY_DIR}/data_docs"


@dataclass
class ValidationOutcome:
    success: bool
    failures: list[str]
    notes: list[str] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)


def columns_rule(columns: list[str], derived: list[str]) -> Any:
    """The release table has exactly ``columns`` (the frame adds the ``derived`` ones)."""
    return gxe.ExpectTableColumnsToMatchSet(column_set=columns + derived, exact_match=True)


def _at_least_one(column: str) -> Any:
    return gxe.ExpectColumnValuesToBeBetween(column=column, min_value=1)


def sample_rules(columns: list[str], derived: list[str], non_empty: tuple[str, str]) -> list[Any]:
    """What every table of samples must hold: its exact columns, unique non-null ids, a
    question and an answer, and images that decode."""
    return [
        columns_rule(columns, derived),
        gxe.ExpectColumnValuesToBeUnique(column="sample_id"),
        gxe.ExpectColumnValuesToNotBeNull(column="sample_id"),
        *(_at_least_one(column) for column in non_empty),
        gxe.ExpectColumnValuesToBeInSet(column="images_decode", value_set=[True]),
    ]


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
        what = f"{counted(detail['unexpected_count'], 'row')} failed"
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
        checkpoint = context.checkpoints.add(
            gx.Checkpoint(name=key, validation_definitions=[definition], result_format=result_format)
        )
        outcome = checkpoint.run(batch_parameters={"dataframe": check.frame})
        for suite_result in outcome.run_results.values():
            results[check.name] = suite_result.to_json_dict()
            failures += [_describe_failure(check, r) for r in suite_result.results if not r.success]
    if docs_dir is not None:
        site = f"{name}-{run}"
        context.add_data_docs_site(
            site_name=site,
            site_config={
                "class_name": "SiteBuilder",
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
                "store_backend": {
                    "class_name": "TupleFilesystemStoreBackend",
                    "base_directory": str(docs_dir.resolve()),
                },
            },
        )
        context.build_data_docs(site_names=[site])
    return ValidationOutcome(success=not failures, failures=failures, results=results)


def validate_release(path: Path | str, kind: ReleaseKind) -> ValidationOutcome:
    """Validate the release at ``path`` with its kind's suite and write its ``quality/`` folder."""
    release = open_release(path)
    if release.benchmark != kind.benchmark:
        raise ReleaseError(f"{path} is a {release.benchmark} release, not {kind.benchmark}")
    checks, notes = kind.checks(release)
    docs_dir = release.path / DATA_DOCS_DIR
    outcome = run_checks(f"{release.benchmark}-{release.version}", checks, docs_dir)
    outcome.notes = notes
    write_json(
        release.path / VALIDATION_FILE,
        {
            "benchmark": release.benchmark,
            "version": release.version,
            "success": outcome.success,
            "validated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "great_expectations": gx.__version__,
            "failures": outcome.failures,
            "notes": notes,
            "results": outcome.results,
        },
    )
    record_artifacts(release.path)
    return outcome
