"""POPE's evaluation (seed 000 4.1; POPE's evaluate.py): one vision model on every probe of a
release, ``plain`` or through Kestrel's loop (``--system kestrel``).

    answer       plain: the question with the image, read by POPE's rule; kestrel: initial
                 answer and claim, grounding, evidence, claim-level verification, evidence-gated
                 self-refinement (at most 3 rounds), each step in the item's trace
    summarise    accuracy, precision, recall, F1 and yes ratio per (dataset, split); MME's score
                 for MME's probes; for Kestrel the initial -> final transitions (Figure 4) and the
                 rounds reached (Table 3); the run's cells (dataset x split) replace those of an
                 earlier run in the folder (``evaluation.runs``)

The steps of the evaluation flow (``flows/evaluate.py``) for POPE releases.
"""

from __future__ import annotations

from pathlib import Path

from mmcurate.benchmarks import register_part
from mmcurate.benchmarks.pope import PopeEvalConfig
from mmcurate.core.config import Settings
from mmcurate.core.ids import new_run_id
from mmcurate.evaluation.failures import check_failures
from mmcurate.evaluation.pope.probes import (
    ANSWERS_FILE,
    CELL,
    FAILED,
    KESTREL,
    ORACLE_TITLE,
    PLAIN,
    answers_table,
    refuse_oracle_grounding,
)
from mmcurate.evaluation.runs import updating
from mmcurate.releases.reader import Release
from mmcurate.releases.unembed import canonical_rows
from mmcurate.tasks.evaluate import answer_pope, summarise_pope


@register_part("pope", "evaluate")
def evaluate_pope(
    bench: Release,
    settings: Settings,
    name: str,
    target: Path,
    allow_incomplete: bool = False,
    system: str = PLAIN,
    oracle_grounding: bool = False,
) -> None:
    oracle = system == KESTREL and refuse_oracle_grounding(settings, bench, oracle_grounding)  # before any call
    probes = canonical_rows(bench, settings.image_store(), "probes")
    rows, notes, calls = answer_pope(probes, settings, name, system, new_run_id())
    failed = [row["error"] for row in rows if row["grade"] == FAILED]
    incomplete = check_failures(name, len(failed), len(rows), failed[0] if failed else None, allow_incomplete)
    title = (
        f"{name} on {bench.benchmark} {bench.version} ({system} system"
        + (f", {ORACLE_TITLE})" if oracle else ")")
        + (f". {incomplete}" if incomplete else "")
    )
    detector = {"detector": PopeEvalConfig.of(settings).kestrel.detector_record()} if system == KESTREL else None
    with updating(target, bench.benchmark, bench.version, bench.content_id, name, system, detector) as folder:
        merged = folder.merge(ANSWERS_FILE, answers_table(rows), CELL)
        for line in folder.messages():
            print(line)
        summarise_pope(merged.to_pylist(), folder.staging, title, [*notes, *filter(None, [folder.note()])])
    print(
        f"answers, metrics and traces -> {target}; model calls: {sum(r['calls'] for r in calls)}, "
        f"failed: {sum(r['failures'] for r in calls)}"
    )
