"""CHANGELOG.md of a re-curated release: what a reader of the benchmark sees changed.

For the new version: the models that caused the re-curation (added, by role) and the
original models whose recorded answers were reused; per source, the samples the parent
had, removed, changed, added and what the new version has; every removed and changed
sample with its reason and the model that decided it; and the evaluation numbers of the
parent's reference models on both versions. Those come from the evaluation runs of the
parent found under the workdir (``<workdir>/evaluations/<benchmark>-<version>/<run>``):
the parent's numbers over all its items, and the same run's numbers over the items of the
samples the new version keeps unchanged. A re-curation only removes samples or alters
them, so those items are exactly what the run would answer on them again; no model is
called. Runs of the new version found there are shown too. Without any run the section
says so. The parent's own changelog follows, so the file is the release's whole history.

The file is written into the release before it is sealed (the manifest pins it), and the
dataset card carries the same text as its "Changes" section.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mmcurate.core.markdown import markdown_table
from mmcurate.core.plural import counted
from mmcurate.evaluation.deflectionbench.metrics import RATES, compute_metrics
from mmcurate.evaluation.deflectionbench.tables import table4_rows

from .diff import ReleaseDiff
from .reader import Release

CHANGELOG = "CHANGELOG.md"
NO_SOURCE = "(no source)"
TABLE4_COLUMNS = ("sample_id", "scenario", "n_negatives", "negatives", "grade")


def _counts(diff: ReleaseDiff, parent_ids: list[str], new_ids: list[str], default: str) -> list[dict]:
    source = diff.sources
    before = Counter(source.get(s, default) for s in parent_ids)
    after = Counter(source.get(s, default) for s in new_ids)
    removed = Counter(r.source or default for r in diff.removed)
    changed = Counter(c.source or default for c in diff.changed)
    added = Counter(source.get(s, default) for s in diff.added)
    rows = [
        {
            "source": name,
            f"in {diff.old_version}": before[name],
            "removed": removed[name],
            "changed": changed[name],
            "added": added[name],
            f"in {diff.new_version}": after[name],
        }
        for name in sorted(set(before) | set(after))
    ]
    return rows


def _runs(workdir: Path, benchmark: str, version: str) -> dict[str, Path]:
    folder = workdir / "evaluations" / f"{benchmark}-{version}"
    return (
        {p.name: p for p in sorted(folder.iterdir()) if p.is_dir() and not p.name.startswith(".")}
        if folder.is_dir()
        else {}
    )  # hidden: a run's staging folder (evaluation.runs)


def _scores(run: Path, keep: set[str] | None) -> list[dict] | None:
    """A run's headline numbers, over the items of ``keep`` (None: all): DeflectionBench's rates
    per scenario as in Table 4 (``answers.parquet``), RefLVQA's mean grade per metric (``grades.parquet``)."""
    answers, grades = run / "answers.parquet", run / "grades.parquet"
    if answers.is_file() and set(TABLE4_COLUMNS) <= set(pq.read_schema(answers).names):
        table = table4_rows(pq.read_table(answers, columns=list(TABLE4_COLUMNS)))  # Table 4's rows, at n = 2
        if keep is not None:
            table = table.filter(pc.is_in(table["sample_id"], value_set=pa.array(sorted(keep), pa.string())))
        return [
            {
                "scenario": row["scenario"],
                "n": row["graded"],
                **{rate: None if row[rate] is None else round(row[rate], 3) for rate in RATES},
            }
            for row in compute_metrics(table).to_pylist()
        ]
    if grades.is_file():
        table = pq.read_table(grades, columns=["sample_id", "metric", "grade"])
        if keep is not None:
            table = table.filter(pc.is_in(table["sample_id"], value_set=pa.array(sorted(keep), pa.string())))
        out: dict[str, list[float]] = {}
        for row in table.to_pylist():
            if row["grade"] is not None:
                out.setdefault(row["metric"], []).append(row["grade"])
        return [
            {"metric": metric, "n": len(values), "mean": round(sum(values) / len(values), 3)}
            for metric, values in sorted(out.items())
        ]
    return None


def evaluation_section(workdir: Path, benchmark: str, diff: ReleaseDiff, new_ids: list[str]) -> list[str]:
    """The reference models' numbers on both versions (see the module docstring)."""
    changed = {c.sample_id for c in diff.changed}
    unchanged = {s for s in new_ids if s not in changed and s not in set(diff.added)}
    old_runs, new_runs = _runs(workdir, benchmark, diff.old_version), _runs(workdir, benchmark, diff.new_version)
    if not old_runs and not new_runs:
        return [
            f"No evaluation run of {benchmark} {diff.old_version} or {diff.new_version} was found under "
            f"`{workdir.name}/evaluations/`, so no model's numbers are compared here "
            f"(`mmcurate evaluate RELEASE --model M` writes one)."
        ]
    lines = []
    for name, run in old_runs.items():
        before, after = _scores(run, None), _scores(run, unchanged)
        if before is None:
            lines.append(f"- `{name}`: its results hold no per-item grades to compare")
            continue
        lines += [
            f"#### `{name}` on {diff.old_version} (all items)",
            "",
            markdown_table(before),
            "",
            f"#### `{name}` on {diff.new_version} (the {counted(len(unchanged), 'sample')} it keeps unchanged; "
            f"answers of the {diff.old_version} run, no new calls)",
            "",
            markdown_table(after or []),
            "",
        ]
    for name, run in new_runs.items():
        scores = _scores(run, None)
        if scores:
            lines += [f"#### `{name}` evaluated on {diff.new_version}", "", markdown_table(scores), ""]
    return lines


def render_changelog(
    parent: Release,
    diff: ReleaseDiff,
    new_ids: list[str],
    added: dict[str, list[str]],
    reused: list[str],
    workdir: Path,
    content_id: str,
) -> str:
    """The CHANGELOG.md text of the new version (see the module docstring)."""
    sources = list(parent.manifest.counts.per_source)
    default = sources[0] if len(sources) == 1 else NO_SOURCE  # a release whose rows name no source (RefLVQA)
    models = "; ".join(f"{role}: {', '.join(f'`{m}`' for m in names)}" for role, names in added.items())
    lines = [
        "# Changelog",
        "",
        f"## {diff.new_version}: re-curation of {diff.old_version} (content id `{content_id[:16]}`)",
        "",
        f"New models: {models or 'none'}. "
        + (
            f"The models of {diff.old_version} ({', '.join(f'`{m}`' for m in reused)}) were not asked again: "
            f"their answers recorded in its ledger stand."
            if reused
            else "No recorded answer was reused."
        ),
        "",
        f"{len(diff.removed)} removed, {len(diff.changed)} changed, {len(diff.added)} added.",
        "",
        "### Per source",
        "",
        markdown_table(_counts(diff, list(parent.sample_ids), new_ids, default)),
        "",
    ]
    if diff.removed:
        lines += ["### Removed", ""]
        lines += [
            f"- `{r.sample_id}` ({r.source or default}): {r.reason}" + (f" [model `{r.model}`]" if r.model else "")
            for r in diff.removed
        ]
        lines.append("")
    if diff.changed:
        lines += ["### Changed", ""]
        lines += [
            f"- `{c.sample_id}` ({c.source or default}): {c.reason}"
            + (f" [models {', '.join(f'`{m}`' for m in c.models)}]" if c.models else "")
            for c in diff.changed
        ]
        lines.append("")
    lines += [
        "### Evaluation of the reference models",
        "",
        *evaluation_section(workdir, parent.benchmark, diff, new_ids),
        "",
    ]
    earlier = parent.path / CHANGELOG
    if earlier.is_file():
        history = earlier.read_text(encoding="utf-8").split("\n", 1)[1].lstrip("\n")
        lines += [history.rstrip(), ""]
    else:
        lines += [f"## {diff.old_version}", "", f"The first release ({counted(len(parent.sample_ids), 'sample')}).", ""]
    return "\n".join(lines).rstrip() + "\n"


def card_section(changelog: str) -> str:
    """The changelog as the card's section: its headings one level down, without its title."""
    body = changelog.split("\n", 1)[1].lstrip("\n") if changelog.startswith("# ") else changelog
    return "\n".join("#" + line if line.startswith("#") else line for line in body.splitlines()).rstrip() + "\n"
