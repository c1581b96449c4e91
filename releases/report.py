"""One self-contained HTML page per release: a summary line and contents first, then funnel,
retention per source, why samples were removed and quarantined (plots), a gallery of kept and
removed samples per stage (``releases.gallery``), sources, convergence, judge errors,
near-duplicate pairs side by side, quarantine.

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
from .gallery import gallery, near_duplicate_pairs, reason_counts
from .manifest import REPORT, record_artifacts, recorded_validation
from .plots import png_bytes, reasons_figure, retention_figure
from .reader import Release, open_release

# statistics tables the report template gives a section of their own (with a plot or a note)
OWN_SECTIONS = ("funnel", "per_source", "global", "topics", "convergence", "calls", "judge_errors", "near_duplicates")


def quarantine_counts(release: Release) -> list[dict]:
    """Quarantined records per (source, reason), most frequent first."""
    table = release.quarantine
    pairs = Counter(zip(table.column("source").to_pylist(), table.column("reason").to_pylist()))
    return [{"source": s, "reason": r, "records": n} for (s, r), n in pairs.most_common()]


def retention(release: Release) -> dict[str, tuple[int, int]]:
    """Per source: (entered, released), from the per-source statistics or the manifest's counts."""
    rows = release.manifest.statistics.get("per_source") or []
    if rows and all("ingested" in r and "retained" in r for r in rows):
        return {str(r["source"]): (int(r["ingested"]), int(r["retained"])) for r in rows}
    counts = release.manifest.counts.per_source
    return {
        str(source): (
            int(entry.get("ingested", 0)),
            int(entry["released"] if "released" in entry else entry.get("retained", 0)),
        )
        for source, entry in counts.items()
        if isinstance(entry, dict) and "ingested" in entry
    }


def summary_line(release: Release) -> str:
    """Kept of entered, and what each stage left (the funnel), in one line."""
    funnel = release.manifest.statistics.get("funnel") or []
    released = len(release.sample_ids)
    quarantined = release.quarantine.num_rows
    tail = f"; {counted(quarantined, 'record')} quarantined" if quarantined else ""
    if not funnel:
        return f"{counted(released, 'sample')} released{tail}."
    first = int(funnel[0]["remaining"])
    share = f" ({100 * released / first:.1f}%)" if first else ""
    stages = " → ".join(f"{r['stage']} {r['remaining']}" for r in funnel)
    return f"Kept {released} of {first}{share}: {stages}{tail}."


def _figure(figure) -> str:
    return base64.b64encode(png_bytes(figure)).decode("ascii")


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
    outcome = (
        "passed"
        if recorded.get("success")
        else f"FAILED ({counted(len(recorded.get('failures') or []), 'expectation')})"
    )
    return f"{outcome}, {recorded.get('validated_at', 'at an unknown time')}"


def render_report(release: Release) -> str:
    m = release.manifest
    stats = m.statistics
    plots = m.plots
    by_file = {file: title for title, file in plots.items()}
    env = Environment(loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined, autoescape=select_autoescape())
    env.filters["counted"] = counted
    kept_by_source = retention(release)
    quarantine = quarantine_counts(release)
    by_reason: Counter[str] = Counter()
    for row in quarantine:
        by_reason[row["reason"]] += row["records"]
    removed = reason_counts(release)
    return env.get_template("report.html.j2").render(
        m=m,
        summary=summary_line(release),
        retention_png=_figure(retention_figure(kept_by_source)) if kept_by_source else None,
        removal_png=_figure(reasons_figure("Samples removed, by reason", removed)) if removed else None,
        quarantine_png=_figure(reasons_figure("Records quarantined, by reason", dict(by_reason.most_common())))
        if by_reason
        else None,
        gallery=gallery(release),
        pairs=near_duplicate_pairs(release),
        pretty=release.pretty_name,
        stats=stats,
        funnel_png=_inline_png(release, "funnel.png" if "funnel.png" in by_file else None),
        convergence_png=_inline_png(release, "convergence.png" if "convergence.png" in by_file else None),
        topics_png=_inline_png(release, "topics.png" if "topics.png" in by_file else None),
        distributions=[
            (t, png) for t, f in plots.items() if f.startswith("distribution-") and (png := _inline_png(release, f))
        ],
        own=OWN_SECTIONS,
        quarantine=quarantine,
        validation=validation_status(release),
    )


def write_report(path: Path | str) -> Path:
    """Write ``report.html`` into the release and record its checksum."""
    release = open_release(path)
    out = release.path / REPORT
    out.write_text(render_report(release))
    record_artifacts(release.path)
    return out
