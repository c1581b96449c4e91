"""POPE's evaluation (seed 000 4.1; POPE's evaluate.py): one vision model on every probe of a
release, ``plain`` or through Kestrel's loop (``--system kestrel``).

    answer       plain: the question with the image, read by POPE's rule; kestrel: initial
                 answer and claim, grounding, evidence, claim-level verification, evidence-gated
                 self-refinement (at most 3 rounds), each step in the item's trace
    summarise    accuracy, precision, recall, F1 and yes ratio per (dataset, split); MME's score
                 for MME's probes; for Kestrel the initial -> final transitions (Figure 4) and the
                 rounds reached (Table 3)

The steps of the evaluation flow (``flows/evaluate.py``) for POPE releases.
"""
from __future__ import annotations

from pathlib import Path

from mmcurate.core.config import Settings
from mmcurate.core.ids import new_run_id
from mmcurate.core.images import ImageStore
from mmcurate.evaluation.failures import check_failures
from mmcurate.evaluation.pope import FAILED, PLAIN
from mmcurate.releases.reader import Release
from mmcurate.releases.unembed import canonical_rows
from mmcurate.tasks.evaluate import answer_pope, summarise_pope


def evaluate_pope(bench: Release, settings: Settings, name: str, target: Path, allow_incomplete: bool = False,
                  system: str = PLAIN) -> None:
    probes = canonical_rows(bench, ImageStore(settings.workdir / "images"), "probes")
    rows, notes, calls = answer_pope(probes, settings, name, system, new_run_id())
    failed = [row["error"] for row in rows if row["grade"] == FAILED]
    incomplete = check_failures(name, len(failed), len(rows), failed[0] if failed else None, allow_incomplete)
    title = f"{name} on {bench.benchmark} {bench.version} ({system} system)" + (f". {incomplete}" if incomplete else "")
    summarise_pope(rows, target, title, notes)
    print(f"answers, metrics and traces -> {target}; model calls: {sum(r['calls'] for r in calls)}, "
          f"failed: {sum(r['failures'] for r in calls)}")
