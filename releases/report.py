"""One self-contained HTML page per release: funnel, sources, convergence, judge errors, quarantine.

A release shows the sections of the statistics its manifest records, and only those: a
DeflectionBench release records per-source and global tables, topics, convergence and judge
errors, a ReflectV, POPE or CRAG-MM release none of them, so its report has no such section
(empty or not). Each table is shown once: those with a section of their own (``OWN_SECTIONS``)
are not repeated among the others.
"""
from __future__ import annotations

import base64
from collections import Counter
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from mmcurate.core.plural import counted

from .card import TEMPLATES
from .manifest import REPORT, record_artifacts, recorded_validation
from .near_duplicates import flagged_rows
from .reader import Release, open_release


# statistics tables the report template gives a section of their own (with a plot or a note)
OWN_SECTIONS = ("funnel", "per_source", "global", "topics", "convergence", "calls", "judge_errors", "near_duplicates")


def quarantine_counts(release: Release) -> list[dict]:
    """Quarantined records per (source, reason), most frequent first."""
    table = release.quarantine
    pairs = Counter(zip(table.column("source").to_pylist(), table.column("reason").to_pylist()))
    return [{"source": s, "reason": r, "records": n} for (s, r), n in pairs.most_common()]


def _inline_png(release: Release, file: str | None) -> str | None:
    if not file:
        return None
    path = release.path / "plots" / file
    return base64.b64encode(path.read_bytes()).decode("ascii") if path.is_file() else None


def validation_status(release: Release) -> str:
    """One line: whether the Great Expectations suite passed, and when it last ran."""
    recorded = recorded_validation(release.path)
    if recorded is None:
        return "not validated (run `mmcurate validate`)"
    outcome = "passed" if recorded.get("success") else f"FAILED ({counted(len(recorded.get('failures') or []), 'expectation')})"
    return f"{outcome}, {recorded.get('validated_at', 'at an unknown time')}"


def render_report(release: Release) -> str:
    m = release.manifest
    stats = m.statistics
    plots = m.plots
    by_file = {file: title for title, file in plots.items()}
    env = Environment(loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined, autoescape=select_autoescape())
    env.filters["counted"] = counted
    return env.get_template("report.html.j2").render(
        m=m,
        pretty=release.pretty_name,
        stats=stats,
        funnel_png=_inline_png(release, "funnel.png" if "funnel.png" in by_file else None),
        convergence_png=_inline_png(release, "convergence.png" if "convergence.png" in by_file else None),
        topics_png=_inline_png(release, "topics.png" if "topics.png" in by_file else None),
        distributions=[(t, png) for t, f in plots.items()
                       if f.startswith("distribution-") and (png := _inline_png(release, f))],
        own=OWN_SECTIONS,
        quarantine=quarantine_counts(release),
        near_duplicates=flagged_rows(release),
        validation=validation_status(release),
    )


def write_report(path: Path | str) -> Path:
    """Write ``report.html`` into the release and record its checksum."""
    release = open_release(path)
    out = release.path / REPORT
    out.write_text(render_report(release))
    record_artifacts(release.path)
    return out
