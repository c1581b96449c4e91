"""DeflectionBench's evaluation (seed 003, section 4): one model, four scenarios.

    parametric   no context          oracle       gold contexts only
    realistic    gold + n negatives  adversarial  negatives only

The model answers with the paper's decoding settings (``evaluation.decoding``; a closed API with
its model spec's own, ``evaluation.decoding.closed_api``). Every answer
is judged (SimpleQA rubric); accuracy, deflection, hallucination and the truthfulness score
per scenario and per source, realistic and adversarial at Table 4's 2 negatives, and per
number of negatives (Figure 3); with several abstention levels the
strictness sweep, with ``modality_analysis`` the negative-modality table. The answers
are also CRAG-scored (first 75 tokens; perfect / acceptable / missing / incorrect). The
answering ``system`` is ``plain`` or ``verify-first`` (CRUISE's gate around the model);
a non-plain run's default folder carries the system's name, so it never overwrites the
plain run; a run adds its cells (scenario x n x negatives x abstention) to the folder's
(``evaluation.runs``). The steps of the evaluation flow (``flows/evaluate.py``) for
DeflectionBench releases.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mmcurate.benchmarks import register_part
from mmcurate.benchmarks.deflectionbench import DeflectionBenchConfig, DeflectionEvalConfig, VerifyFirstConfig
from mmcurate.core.config import Settings
from mmcurate.core.ids import new_run_id
from mmcurate.evaluation.decoding import decoded_spec, decoding_note, decoding_record
from mmcurate.evaluation.deflectionbench.report import ANSWERS_FILE, CELL, CRAG_FILE
from mmcurate.evaluation.deflectionbench.scenarios import DEFAULT_NEGATIVE_COUNTS, FAILED, PLAIN, SCENARIOS
from mmcurate.evaluation.failures import check_failures
from mmcurate.evaluation.runs import check_folder, updating
from mmcurate.evaluation.verify_first import verify_first_notes
from mmcurate.gating.prompts import STRICTNESS_LEVELS, prompt_set
from mmcurate.releases.reader import Release
from mmcurate.releases.unembed import canonical_samples
from mmcurate.tasks.evaluate import answer_scenarios, score_crag, summarise


@register_part("deflectionbench", "evaluate")
def evaluate_deflectionbench(
    bench: Release,
    settings: Settings,
    name: str,
    target: Path,
    allow_incomplete: bool = False,
    scenarios: Sequence[str] = SCENARIOS,
    n_negatives: Sequence[int] = DEFAULT_NEGATIVE_COUNTS,
    abstention: Sequence[str] = ("moderate",),
    modality_analysis: bool = False,
    system: str = PLAIN,
) -> None:
    evaluation = DeflectionEvalConfig.of(settings)
    settings.models[name] = decoded_spec(settings.model(name), evaluation.decoding)  # seed 003, 4.1
    decoding = decoding_record(settings.model(name), evaluation.decoding)
    check_folder(target, bench.benchmark, bench.version, bench.content_id, name, system, {"decoding": decoding})
    samples = canonical_samples(bench, settings.image_store())
    seed = bench.manifest.seed or 0
    section = DeflectionBenchConfig.find(settings)
    templates = prompt_set(section.prompts if section else None)
    results, calls = answer_scenarios(
        samples,
        settings,
        name,
        scenarios,
        n_negatives,
        abstention,
        seed,
        new_run_id(),
        modality_analysis,
        system,
        templates,
    )
    failed = [
        error for grade, error in zip(results["grade"].to_pylist(), results["error"].to_pylist()) if grade == FAILED
    ]
    incomplete = check_failures(name, len(failed), results.num_rows, failed[0] if failed else None, allow_incomplete)
    crag, crag_note, crag_calls = score_crag(results, samples, settings)
    calls += crag_calls
    used = [templates.evaluation(level).id for level in dict.fromkeys(results["abstention"].to_pylist())]
    with updating(
        target, bench.benchmark, bench.version, bench.content_id, name, system, {"decoding": decoding}
    ) as folder:
        results = folder.merge(ANSWERS_FILE, results, CELL)
        crag = folder.merge(CRAG_FILE, crag, CELL)
        for line in folder.messages():
            print(line)
        levels = [level for level in STRICTNESS_LEVELS if level in set(results["abstention"].to_pylist())]
        title = f"{name} on {bench.benchmark} {bench.version} ({', '.join(levels)} abstention, {system} system)" + (
            f". {incomplete}" if incomplete else ""
        )
        gate = VerifyFirstConfig.of(settings)
        gate_notes = verify_first_notes(settings, name, gate.router, gate.verifier) if system != PLAIN else []
        notes = [
            f"Answered with {templates.describe(used)}.",
            decoding_note(name, decoding),
            *gate_notes,
            *filter(None, [folder.note()]),
        ]
        summarise(results, folder.staging, title, crag, crag_note, notes, evaluation.table_negatives)
    print(
        f"answers, metrics and plot -> {target}; model calls: {sum(r['calls'] for r in calls)}, "
        f"failed: {sum(r['failures'] for r in calls)}"
    )
