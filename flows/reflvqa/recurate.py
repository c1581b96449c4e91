"""RefLVQA re-curation when stronger models appear: the next minor version at the cost of the
new models' calls only.

    roles      the new inspectors and/or a new text entailment judge; the parent's ledger
               holds the original inspectors' graded answers and the judged (sentence,
               document) pairs
    necessity  the image-necessity filter over the released QA pairs with every inspector:
               the original ones' recorded grades count, only the new ones answer
    citations  the new judge decides the citations among the documents the parent judged
               (the release's knowledge base gives their text)
    near-dups  and draft, as every re-curation (``tasks.recuration``)
"""

from __future__ import annotations

from mmcurate.annotation.reflvqa.necessity import ImageNecessity
from mmcurate.annotation.reflvqa.recheck import RecheckCitations, judged_candidates
from mmcurate.benchmarks import register_part
from mmcurate.releases.recuration import Recuration
from mmcurate.releases.reflvqa.draft import qa_samples, reflvqa_recuration_draft, release_corpus
from mmcurate.tasks.recuration import Recurated, recheck_near_duplicates
from mmcurate.tasks.stages import run_stage


@register_part("reflvqa", "recurate")
def recurate_reflvqa(run: Recuration) -> Recurated:
    parent, settings, cfg, run_id = run.parent, run.settings, run.section, run.run_id
    store = run.images
    pairs, corpus = qa_samples(parent, store), release_corpus(parent, store)

    evaluator = parent.manifest.components.get("necessity_evaluator")
    necessary = run_stage(
        ImageNecessity(
            cfg.inspectors,
            cfg.evaluator,
            cfg.max_right_inspectors,
            run.recorded("necessity", ("right", "wrong"), judge=evaluator),
        ),
        pairs,
        settings,
        run_id,
    )
    documents = {r["doc_id"]: (r["title"], r["text"]) for r in corpus.to_pylist() if r["modality"] == "text"}
    judges = [f"llm:{name}" for name in run.reusable] + [parent.manifest.judge_name]
    cited = run_stage(
        RecheckCitations(
            cfg.text_entailment,
            documents,
            judged_candidates(parent.ledger),
            run.recorded("citation", ("entail", "reject"), models=judges, part="sentence"),
        ),
        necessary.kept,
        settings,
        run_id,
    )
    deduped = recheck_near_duplicates(run, cited.kept)

    draft = reflvqa_recuration_draft(
        settings, run.version, run_id, parent, run.parent_record, [necessary, cited, deduped], corpus
    )
    return Recurated(
        draft,
        necessary.calls + cited.calls,
        draft.tables["qa"].num_rows,
        (f"{cited.counts['changed']} with other citations",),
    )
