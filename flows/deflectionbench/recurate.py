"""DeflectionBench's re-curation steps (the re-curation flow, ``flows/recurate.py``, runs them
between opening the release and publishing the next version).

    Stage I    gate the released samples with the pool plus the new models; the original
               models' answers (Stage I, the gold and distractor checks) come from the
               parent's ledger
    Stage III  the gold and distractor checks with the new models on what is kept
    near-dups  as every re-curation (``tasks.recuration``)
    draft      the next version, with the contexts as mined then
"""

from __future__ import annotations

from collections import Counter
from typing import cast

from mmcurate.annotation.deflectionbench.oracle import OracleCheck
from mmcurate.benchmarks import register_part
from mmcurate.gating.elimination import EliminationResult
from mmcurate.gating.parametric import ParametricGate
from mmcurate.gating.prompts import prompt_set
from mmcurate.planning.recuration import GRADES
from mmcurate.releases.deflectionbench.draft import deflection_draft, inherited_ingest
from mmcurate.releases.deflectionbench.topics import inherited_topics
from mmcurate.releases.recuration import Recuration
from mmcurate.releases.unembed import canonical_samples
from mmcurate.tasks.recuration import Recurated, recheck_near_duplicates
from mmcurate.tasks.stages import run_stage


@register_part("deflectionbench", "recurate")
def recurate_deflectionbench(run: Recuration) -> Recurated:
    parent, settings, cfg, run_id = run.parent, run.settings, run.section, run.run_id
    samples = canonical_samples(parent, run.images)

    templates = prompt_set(cfg.prompts)
    gated = run_stage(
        ParametricGate(cfg.gating, templates, recorded=run.recorded("parametric", GRADES)), samples, settings, run_id
    )  # Stage I
    oracle = OracleCheck(
        cfg.gating.pool,
        cfg.k_min,
        cfg.gating.oracle_rule,
        cfg.gating.force_guess,
        templates,
        recorded=run.recorded("oracle", GRADES),
    )
    checked = run_stage(oracle, gated.kept, settings, run_id)  # Stage III
    deduped = recheck_near_duplicates(run, checked.kept)

    draft = deflection_draft(
        settings,
        run.version,
        run_id,
        pairing=None,
        # run_stage returns what the stage's merge made: an elimination stage's own result
        gating=cast(EliminationResult, gated),
        oracle=cast(EliminationResult, checked),
        ingested=inherited_ingest(parent.manifest),
        carried=dict(Counter(samples["source"].to_pylist())),
        quarantine=parent.quarantine,
        source_files=[entry.recorded() for entry in parent.manifest.source_files],
        components=cast(dict[str, str], parent.manifest.components),  # deflection_draft wrote strings
        parent=run.parent_record,
        history=parent.ledger,
        topics=inherited_topics(parent.manifest, parent.ledger, samples),
        dedup=deduped,
        indexes=parent.manifest.indexes,
    )  # contexts as mined then
    return Recurated(draft, gated.calls + checked.calls, draft.tables["test"].num_rows)
