"""A benchmark's history across its versions: what each version holds, what each re-curation
removed and whose answers removed it, and how the benchmark saturates as models are added.

Read from the versions under ``RELEASES_ROOT/<benchmark>`` alone (their manifests, ledgers and
the diff of each version against its parent), so the page can be made on any machine that
holds the releases: no response cache, no workdir.

The saturation curve is the question scheduled re-curation exists for. For each version and
each gating model whose parametric answers that version's own run recorded (the ledger's
``gate.answer`` rows of the run that made it, answers reused from a parent's ledger included),
the share of the samples it was asked that it answered CORRECT without retrieval: for a first
version that is the ingested pool, for a re-curation the parent's released samples, i.e. the
benchmark as it stood. A model asked fewer samples than entered (early elimination: a sample
another model already settled is not sent again) is shown with its own n. A benchmark whose
curation has no parametric gating (RefLVQA, ReflectV, POPE, CRAG-MM) has no curve, and the page
says so.

The optional leaderboard reads evaluation folders as ``mmcurate compare-evals`` does
(``evaluation.compare.read_run``): per run and condition, accuracy (what its grading calls
correct: CORRECT, or CRAG's perfect and acceptable), hallucination (INCORRECT) and missing
(NOT_ATTEMPTED) over the graded answers, each with its 95% Wilson interval; answers without a
grade (failed calls, timeouts, judge errors) are left out and counted.
"""

from __future__ import annotations

import base64
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pyarrow.compute as pc
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from mmcurate.core.markdown import markdown_table
from mmcurate.core.plural import counted
from mmcurate.evaluation.compare import read_run, wilson

from .card import TEMPLATES
from .diff import diff_releases
from .errors import ReleaseError
from .plots import leaderboard_figure, png_bytes, saturation_figure
from .reader import Release, list_versions, open_release

GATING = ("parametric", "gate.answer")  # the ledger rows of a parametric answer: (stage, check)
HISTORY_HTML, HISTORY_MD = "history.html", "HISTORY.md"
# the grades each headline rate counts (SimpleQA's and CRAG's spellings); accuracy counts what
# the run's grading calls correct
HEADLINE = {"accuracy": (), "hallucination": ("INCORRECT", "incorrect"), "missing": ("NOT_ATTEMPTED", "missing")}
BY_RULE = "(a rule, no model)"


@dataclass(frozen=True)
class Version:
    """One version of the benchmark as the history shows it."""

    version: str
    created: str | None
    samples: int
    parent: str | None
    models: list[str]  # gating (or other) models by role, as recorded
    added_models: list[str]  # models this version's curation added to its parent's
    candidates: int | None  # what entered its first stage (funnel), when recorded
    removed: int  # removed from the parent (0 for a first version)
    removed_by: dict[str, int] = field(default_factory=dict)  # deciding model (or BY_RULE) -> samples removed
    removals: list[dict] = field(default_factory=list)  # sample_id, source, reason, model


@dataclass(frozen=True)
class SaturationPoint:
    model: str
    version: str
    created: str | None
    correct: int
    asked: int

    @property
    def share(self) -> float:
        return self.correct / self.asked if self.asked else 0.0


@dataclass
class History:
    benchmark: str
    pretty_name: str
    versions: list[Version]
    saturation: list[SaturationPoint]
    leaderboard: list[dict] = field(default_factory=list)


def _models(release: Release) -> list[str]:
    return [f"{m.role or 'model'}: {m.name}" for m in release.manifest.models]


def _parent_version(release: Release) -> str | None:
    parent = release.manifest.parent
    return parent if isinstance(parent, str) else parent.version if parent is not None else None


def _candidates(release: Release) -> int | None:
    funnel = release.manifest.statistics.get("funnel") or []
    return int(funnel[0]["remaining"]) if funnel and "remaining" in funnel[0] else None


def _saturation(release: Release) -> list[SaturationPoint]:
    """The gating models' parametric answers recorded by the run that made ``release``."""
    ledger = release.ledger
    run_id = release.manifest.counts.run_id or ""
    mask = pc.and_(
        pc.and_(pc.equal(ledger["stage"], GATING[0]), pc.equal(ledger["check"], GATING[1])),
        pc.equal(ledger["run_id"], run_id),
    )
    rows = ledger.filter(mask).select(["model", "verdict"]).to_pylist()
    asked: Counter[str] = Counter(r["model"] for r in rows if r["model"])
    correct: Counter[str] = Counter(r["model"] for r in rows if r["model"] and r["verdict"] == "CORRECT")
    return [
        SaturationPoint(model, release.version, release.manifest.created, correct[model], n)
        for model, n in sorted(asked.items())
    ]


def _version(release: Release, parent: Release | None) -> Version:
    removals: list[dict] = []
    if parent is not None:
        diff = diff_releases(parent, release)
        removals = [
            {"sample_id": r.sample_id, "source": r.source, "reason": r.reason, "model": r.model} for r in diff.removed
        ]
    parent_models = {m.name for m in parent.manifest.models} if parent is not None else set()
    return Version(
        version=release.version,
        created=release.manifest.created,
        samples=len(release.sample_ids),
        parent=_parent_version(release),
        models=_models(release),
        added_models=[m.name for m in release.manifest.models if parent is not None and m.name not in parent_models],
        candidates=_candidates(release),
        removed=len(removals),
        removed_by=dict(Counter(r["model"] or BY_RULE for r in removals).most_common()),
        removals=removals,
    )


def _rates(folder: Path) -> list[dict]:
    """A run's headline rates per condition ("all" first), each with its Wilson interval, over
    the answers its grading (``evaluation.compare.GRADINGS``) grades."""
    run = read_run(folder)
    model = _run_model(folder)
    grading = run.grading
    grades = run.answers.column(grading.column).to_pylist()
    groups = {"all": list(range(len(grades)))}
    for column in ("scenario", "split", "variant"):
        if column in run.answers.column_names:
            for n, value in enumerate(run.answers.column(column).to_pylist()):
                groups.setdefault(str(value), []).append(n)
            break
    rows = []
    for group, items in groups.items():
        graded = [grades[i] for i in items if grades[i] is not None and grades[i] not in grading.ungraded]
        row: dict = {
            "model": model,
            "run": folder.name,
            "release": run.release,
            "condition": group,
            "graded": len(graded),
            "left out": len(items) - len(graded),
        }
        for metric, kinds in HEADLINE.items():
            k = sum(g in (grading.correct if metric == "accuracy" else kinds) for g in graded)
            interval = wilson(k, len(graded))
            row[metric] = k / len(graded) if graded else None
            row[f"{metric} low"], row[f"{metric} high"] = interval if interval else (None, None)
        rows.append(row)
    return rows


def _run_model(folder: Path) -> str:
    """The model a run's ``table.md`` title names (``# <model> on <benchmark> <version> (...)``)."""
    title = (folder / "table.md").read_text(encoding="utf-8").splitlines()[0]
    return title[2:].split(" on ", 1)[0].strip()


def benchmark_history(folder: Path | str, evaluations: list[Path] | None = None) -> History:
    """The history of the benchmark whose versions lie in ``folder`` (``RELEASES_ROOT/<benchmark>``),
    with a leaderboard from the ``evaluations`` run folders when given."""
    folder = Path(folder)
    versions = list_versions(folder.parent, folder.name)
    if not versions:
        raise ReleaseError(f"{folder} holds no release version (folders named like 1.0.0)")
    releases = {v: open_release(folder / v) for v in versions}
    benchmarks = {r.benchmark for r in releases.values()}
    if len(benchmarks) > 1:
        raise ReleaseError(f"{folder} holds releases of several benchmarks: {', '.join(sorted(benchmarks))}")
    entries, saturation = [], []
    for release in releases.values():
        parent_version = _parent_version(release)
        entries.append(_version(release, releases.get(parent_version) if parent_version else None))
        saturation += _saturation(release)
    history = History(
        benchmark=benchmarks.pop(),
        pretty_name=releases[versions[-1]].pretty_name,
        versions=entries,
        saturation=saturation,
    )
    for run in evaluations or []:
        rows = _rates(Path(run))
        if rows[0]["release"].split(" ")[0] != history.benchmark:
            raise ReleaseError(f"{run} evaluates {rows[0]['release']}, not a version of {history.benchmark}")
        history.leaderboard += rows
    return history


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def version_rows(history: History) -> list[dict]:
    return [
        {
            "version": v.version,
            "created": (v.created or "")[:10],
            "samples": v.samples,
            "from": v.parent or (f"{v.candidates} candidates" if v.candidates is not None else "–"),
            "removed": v.removed,
            "removed by": ", ".join(f"{m} ({n})" for m, n in v.removed_by.items()) or "–",
            "models added": ", ".join(v.added_models) or "–",
        }
        for v in history.versions
    ]


def saturation_rows(history: History) -> list[dict]:
    return [
        {
            "version": p.version,
            "created": (p.created or "")[:10],
            "model": p.model,
            "answered correctly": p.correct,
            "asked": p.asked,
            "share (%)": _pct(p.share),
        }
        for p in history.saturation
    ]


def leaderboard_rows(history: History) -> list[dict]:
    out = []
    for r in history.leaderboard:
        row = {
            "run": r["run"],
            "model": r["model"],
            "release": r["release"],
            "condition": r["condition"],
            "graded": r["graded"],
        }
        for metric in HEADLINE:
            interval = (
                "" if r[f"{metric} low"] is None else f" [{_pct(r[f'{metric} low'])}, {_pct(r[f'{metric} high'])}]"
            )
            row[f"{metric} (%)"] = _pct(r[metric]) + interval
        out.append(row)
    return out


def history_markdown(history: History) -> str:
    """The history as Markdown (for a dataset card)."""
    lines = [
        f"# {history.pretty_name}: history",
        "",
        f"{counted(len(history.versions), 'version')}; the latest, {history.versions[-1].version}, holds "
        f"{counted(history.versions[-1].samples, 'sample')}.",
        "",
        "## Versions",
        "",
        markdown_table(version_rows(history), right=["samples", "removed"]),
        "",
    ]
    for v in history.versions:
        if v.removals:
            lines += [f"### Removed in {v.version}", ""]
            lines += [f"- `{r['sample_id']}` ({r['source'] or 'no source'}): {r['reason']}" for r in v.removals]
            lines.append("")
    lines += ["## Saturation", "", saturation_note(history), ""]
    if history.saturation:
        lines += [markdown_table(saturation_rows(history), right=["answered correctly", "asked", "share (%)"]), ""]
    if history.leaderboard:
        lines += [
            "## Leaderboard",
            "",
            "Shares of the graded answers, 95% Wilson intervals in brackets.",
            "",
            markdown_table(leaderboard_rows(history)),
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def saturation_note(history: History) -> str:
    if not history.saturation:
        return (
            f"{history.pretty_name}'s curation records no parametric answers (no `gate.answer` rows), "
            "so there is no saturation curve to draw."
        )
    return (
        "For each gating model, the share of the samples it was asked that it answered correctly "
        "without retrieval, by the version whose run asked it (a first version asks the ingested pool, "
        "a re-curation its parent's released samples)."
    )


def _inline(data: bytes | None) -> str | None:
    return base64.b64encode(data).decode("ascii") if data else None


def render_history(history: History) -> str:
    """One self-contained static HTML page (plots inline)."""
    env = Environment(loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined, autoescape=select_autoescape())
    dated = [(p.model, _when(p.created, p.version), p.share, p.version) for p in history.saturation]
    saturation_png = _inline(png_bytes(saturation_figure(dated))) if dated else None
    boards = []
    if history.leaderboard:
        for metric in HEADLINE:
            boards.append((metric, _inline(png_bytes(leaderboard_figure(metric, history.leaderboard)))))
    return env.get_template("history.html.j2").render(
        h=history,
        versions=version_rows(history),
        saturation=saturation_rows(history),
        saturation_note=saturation_note(history),
        saturation_png=saturation_png,
        leaderboard=leaderboard_rows(history),
        boards=boards,
    )


def _when(created: str | None, version: str) -> datetime | str:
    try:
        return datetime.fromisoformat(created) if created else version
    except ValueError:
        return version


def write_history(folder: Path | str, out: Path | str | None = None, evaluations: list[Path] | None = None) -> Path:
    """Write ``history.html`` and ``HISTORY.md`` into ``out`` (default: the benchmark's folder,
    beside its versions; never inside a release); return the HTML page's path."""
    from .reader import refuse_inside_release

    history = benchmark_history(folder, evaluations)
    target = Path(out) if out is not None else Path(folder)
    refuse_inside_release(target, "--out")
    target.mkdir(parents=True, exist_ok=True)
    page = target / HISTORY_HTML
    page.write_text(render_history(history), encoding="utf-8")
    (target / HISTORY_MD).write_text(history_markdown(history), encoding="utf-8")
    return page
