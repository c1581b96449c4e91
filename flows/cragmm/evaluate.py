"""CRAG-MM's evaluation as CRUISE (seed 001) reports it: every turn answered by the ``plain``
system (the vision-only baseline) or by ``cruise`` (router, query-aware summary and retrieval,
MAD cutoff, Algorithm 1's gate), within the per-turn budget; multi-turn conversations with
their earlier turns in context; the first 75 tokens of each answer CRAG-graded; the CRAG table
per set, domain and query category with CRAG-MM's multi-turn rule. ``task`` 1, 2 or 3 picks
the competition's task (1: single-turn, image search; 2: single-turn, image and web; 3:
multi-turn, both); ``limit`` the first N conversations of each set. A run adds its cell (task;
the rows of an earlier run of the same task are replaced) to the folder's (``evaluation.runs``).
The steps of the evaluation flow (``flows/evaluate.py``) for CRAG-MM releases.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from mmcurate.benchmarks import register_part
from mmcurate.benchmarks.cragmm import CruiseConfig
from mmcurate.core.config import Settings
from mmcurate.evaluation.cragmm.cruise import PLAIN, select_turns, stand_in_notes
from mmcurate.evaluation.cragmm.report import ALL_TURNS, ANSWERS_FILE, CELL, apply_multi_turn_rule, run_title
from mmcurate.evaluation.failures import check_failures
from mmcurate.evaluation.runs import updating
from mmcurate.releases.reader import Release
from mmcurate.releases.unembed import canonical_samples
from mmcurate.tasks.evaluate import answer_cragmm, score_crag, summarise_cragmm

TURN_COLUMNS = ["sample_id", "set", "session_id", "turn", "domain", "query_category", "dynamism", "egocentric"]


@register_part("cragmm", "evaluate")
def evaluate_cragmm(
    bench: Release,
    settings: Settings,
    name: str,
    target: Path,
    allow_incomplete: bool = False,
    system: str = PLAIN,
    task: str | None = None,
    limit: int | None = None,
    ablations: list[str] | None = None,
) -> None:
    samples = canonical_samples(bench, settings.image_store(), "turns")
    labels = bench.table("turns").select(TURN_COLUMNS).to_pylist()
    by_id = {row["sample_id"]: row for row in samples.to_pylist()}
    turns = [{**by_id[row["sample_id"]], **row} for row in select_turns(labels, task, limit)]
    answers, components, calls = answer_cragmm(turns, settings, name, system, task, ablations)
    failed = [
        e
        for a, e, late in zip(
            answers["answer"].to_pylist(), answers["error"].to_pylist(), answers["timed_out"].to_pylist()
        )
        if a is None and not late
    ]
    incomplete = check_failures(name, len(failed), answers.num_rows, failed[0] if failed else None, allow_incomplete)
    results, by_turn = answers.drop_columns(["sample_id"]), {t["sample_id"]: t for t in turns}
    for column in TURN_COLUMNS[::-1]:
        results = results.add_column(
            0, column, pa.array([by_turn[i][column] for i in answers["sample_id"].to_pylist()])
        )
    results = results.add_column(0, "task", pa.array([task or ALL_TURNS] * results.num_rows, pa.string()))
    crag, crag_note, crag_calls = score_crag(results, samples, settings)
    cruise = CruiseConfig.find(settings)
    reading = cruise.multi_turn_scoring if cruise else "competition"
    ruled = apply_multi_turn_rule(crag, reading)
    notes = [
        *([incomplete] if incomplete else []),
        crag_note,
        *stand_in_notes(settings, name, system, components, ablations or ()),
    ]
    with updating(target, bench.benchmark, bench.version, bench.content_id, name, system) as folder:
        ruled = folder.merge(ANSWERS_FILE, ruled, CELL)
        for line in folder.messages():
            print(line)
        title = run_title(name, bench.version, system, ruled)
        summarise_cragmm(ruled, folder.staging, title, [*notes, *filter(None, [folder.note()])], reading)
    calls += crag_calls
    print(
        f"answers and CRAG tables -> {target}; model calls: {sum(r['calls'] for r in calls)}, "
        f"failed: {sum(r['failures'] for r in calls)}"
    )
