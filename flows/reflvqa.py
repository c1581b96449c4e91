"""RefLVQA curation (seed paper, section 3) as a Prefect flow.

    candidates   Reddit question posts with images and long-form answers (ingest rules)
    relevance    drop posts whose image is not among the 10 nearest to the question
    necessity    drop pairs that text-only inspectors answer right without the image
    sentences    split answers; an LLM marks fact-checkable sentences
    citations    retrieve text and image documents per sentence; keep the entailed ones
    publish      the validated release: QA pairs, cited documents, the knowledge base
"""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from prefect import flow

from mmcurate.core.config import load_config
from mmcurate.core.errors import ConfigError
from mmcurate.core.ids import new_run_id
from mmcurate.core.images import ImageStore, store_folder
from mmcurate.core.schema import QUARANTINE
from mmcurate.core.tables import rows_to_table
from mmcurate.releases.reflvqa import reflvqa_draft
from mmcurate.tasks.ingest import ingest_source, load_samples
from mmcurate.tasks.reflvqa import cite_documents, filter_irrelevant_images, filter_unneeded_images, mark_fact_checkable
from mmcurate.tasks.release import publish_release

DEMO_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "demo.yaml"


@flow(name="reflvqa", log_prints=True)
def reflvqa(config: str = str(DEMO_CONFIG), version: str | None = None) -> str:
    settings = load_config(config)
    cfg = settings.reflvqa
    if cfg is None:
        raise ConfigError(f"{config} has no 'reflvqa' section")
    run_id = new_run_id()

    ingested = ingest_source(cfg.source, settings.workdir)
    candidates, quarantine = load_samples([ingested], [cfg.source.limit])

    relevant = filter_irrelevant_images(candidates, settings, run_id)
    necessary, necessity_calls = filter_unneeded_images(relevant.kept, settings, run_id)
    checkable, factcheck_calls = mark_fact_checkable(necessary.kept, settings, run_id)
    if cfg.image_corpus is not None:
        image_corpus, rejected = store_folder(ImageStore(settings.workdir / "images"), cfg.image_corpus)
        quarantine = pa.concat_tables([quarantine, rows_to_table([r.to_row("image_corpus") for r in rejected],
                                                                 QUARANTINE)])
    else:  # the posts' own images
        image_corpus = sorted({sha for shas in candidates["images"].to_pylist() for sha in shas})
    cited, citation_calls = cite_documents(checkable.kept, image_corpus, settings, run_id)

    draft = reflvqa_draft(settings, version or cfg.version, run_id, ingested, candidates, quarantine,
                          [relevant, necessary, checkable], cited,
                          {"necessity": necessity_calls, "factcheck": factcheck_calls, "citation": citation_calls})
    release = publish_release(draft, settings.releases_root, settings.workdir / "images")
    print(f"reflvqa {draft.version}: {draft.tables['qa'].num_rows} QA pairs -> {release}")
    return str(release)


if __name__ == "__main__":
    reflvqa()
