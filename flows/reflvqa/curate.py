"""RefLVQA curation (seed paper, section 3) as a Prefect flow.

candidates   Reddit question posts with images and long-form answers (ingest rules)
relevance    drop posts whose image is not among the 10 nearest to the question
necessity    drop pairs that text-only inspectors answer right without the image
sentences    split answers; an LLM marks fact-checkable sentences
citations    retrieve text and image documents per sentence (optionally cut); keep the entailed ones
verification (optional) Kestrel claim-level checks of each sentence against its documents
near-duplicates within the release, against earlier versions and named releases: flagged
publish      the validated release: QA pairs, cited documents, the knowledge base
"""

from __future__ import annotations

import pyarrow as pa
from prefect import flow

from mmcurate.annotation.reflvqa.citations import CiteDocuments, image_corpus, knowledge_base, post_titles
from mmcurate.annotation.reflvqa.factcheck import FactCheckable
from mmcurate.annotation.reflvqa.necessity import ImageNecessity
from mmcurate.annotation.reflvqa.relevance import ImageRelevance
from mmcurate.annotation.reflvqa.verification import VerifySentences
from mmcurate.benchmarks import register_part
from mmcurate.flows import DEMO_CONFIG
from mmcurate.releases.curation import begin_curation
from mmcurate.releases.near_duplicates import near_duplicate_stage
from mmcurate.releases.reflvqa.draft import reflvqa_draft
from mmcurate.tasks.ingest import ingest_source, load_samples
from mmcurate.tasks.plan import plan_run, report_spent
from mmcurate.tasks.release import publish_release
from mmcurate.tasks.stages import run_stage


@register_part("reflvqa", "curate")
@flow(name="reflvqa", log_prints=True)
def reflvqa(config: str = str(DEMO_CONFIG), version: str | None = None, allow_incomplete: bool = False) -> str:
    run = begin_curation(config, "reflvqa", version)  # before any work
    settings, cfg, run_id = run.settings, run.section, run.run_id
    near = near_duplicate_stage(settings, "reflvqa", run.version)  # its references read

    ingested = ingest_source(cfg.source, settings)
    candidates, quarantine = load_samples([ingested], [cfg.source.limit])
    images, unusable = image_corpus(cfg.image_corpus, settings.image_store(), candidates)
    quarantine = pa.concat_tables([quarantine, unusable])

    bill = plan_run(settings, run.benchmark, candidates.num_rows)  # before any model call
    relevant = run_stage(
        ImageRelevance(cfg.cross_modal_encoder, cfg.distractor_images, cfg.relevance_top_k, cfg.seed),
        candidates,
        settings,
        run_id,
    )
    necessary = run_stage(
        ImageNecessity(cfg.inspectors, cfg.evaluator, cfg.max_right_inspectors), relevant.kept, settings, run_id
    )
    checkable = run_stage(FactCheckable(cfg.factcheck_model), necessary.kept, settings, run_id)
    cited = run_stage(
        CiteDocuments(
            cfg.text_corpus,
            images,
            cfg.text_corpus_limit,
            top_text=cfg.top_text,
            cross_modal=cfg.cross_modal_encoder,
            top_images=cfg.top_images,
            text_entailment=cfg.text_entailment,
            image_entailment=cfg.image_entailment,
            cutoff=cfg.cutoff,
        ),
        checkable.kept,
        settings,
        run_id,
    )
    stages = [relevant, necessary, checkable, cited]
    if cfg.verification is not None:
        stages.append(
            run_stage(
                VerifySentences(cfg.text_corpus, cfg.verification, cfg.text_corpus_limit), cited.kept, settings, run_id
            )
        )
    stages.append(run_stage(near, stages[-1].kept, settings, run_id))  # near-duplicates

    titles = post_titles(candidates) if cfg.image_corpus is None else None  # a post's title captions its images
    corpus = knowledge_base(cfg.text_corpus, cfg.text_corpus_limit, images, titles)
    draft = reflvqa_draft(settings, run.version, run_id, ingested, candidates, quarantine, stages, corpus)
    release = publish_release(draft, settings.mirror("releases_root"), settings.image_store(), allow_incomplete)
    report_spent(bill, [row for stage in stages for row in stage.calls])
    print(f"reflvqa {draft.version}: {draft.tables['qa'].num_rows} QA pairs -> {release}")
    return str(release)


if __name__ == "__main__":
    reflvqa()
