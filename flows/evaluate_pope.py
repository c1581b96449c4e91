"""POPE's evaluation (seed 000 4.1; POPE's evaluate.py): one vision model on every probe of a
release, ``plain`` or through Kestrel's loop (``--system kestrel``).

    answer       plain: the question with the image, read by POPE's rule; kestrel: initial
                 answer and claim, grounding, evidence, claim-level verification, evidence-gated
                 self-refinement (at most 3 rounds), each step in the item's trace
    summarise    accuracy, precision, recall, F1 and yes ratio per split; for Kestrel the
                 initial -> final transitions (Figure 4) and the rounds reached (Table 3); the
                 run's splits replace those of an earlier run in the folder (``evaluation.runs``)
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow

from mmcurate.core.config import load_config
from mmcurate.core.ids import new_run_id
from mmcurate.core.images import ImageStore
from mmcurate.evaluation.failures import check_failures
from mmcurate.evaluation.pope import ANSWERS_FILE, CELL, FAILED, PLAIN, answers_table
from mmcurate.evaluation.runs import evaluation_folder, updating
from mmcurate.releases.reader import open_release
from mmcurate.releases.unembed import canonical_rows
from mmcurate.tasks.evaluate import answer_pope, summarise_pope

DEMO_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "demo.yaml"


@flow(name="evaluate-pope", log_prints=True)
def evaluate_pope(release: str, model: str, config: str = str(DEMO_CONFIG), out: str | None = None,
                  allow_incomplete: bool = False, system: str = PLAIN) -> str:
    settings = load_config(config)
    name = settings.add_model(model).name
    bench = open_release(release)
    target = evaluation_folder(settings, bench.benchmark, bench.version, name, out, system)
    probes = canonical_rows(bench, ImageStore(settings.workdir / "images"), "probes")
    rows, notes, calls = answer_pope(probes, settings, name, system, new_run_id())
    failed = [row["error"] for row in rows if row["grade"] == FAILED]
    incomplete = check_failures(name, len(failed), len(rows), failed[0] if failed else None, allow_incomplete)
    title = f"{name} on {bench.benchmark} {bench.version} ({system} system)" + (f". {incomplete}" if incomplete else "")
    with updating(target, bench.benchmark, bench.version, bench.content_id, name, system) as folder:
        merged = folder.merge(ANSWERS_FILE, answers_table(rows), CELL)
        for line in folder.messages():
            print(line)
        summarise_pope(merged.to_pylist(), folder.staging, title, [*notes, *filter(None, [folder.note()])])
    print(f"answers, metrics and traces -> {target}; model calls: {sum(r['calls'] for r in calls)}, "
          f"failed: {sum(r['failures'] for r in calls)}")
    return str(target)
