"""CRAG-MM as a release (the benchmark CRUISE, seed 001, reports on), as a Prefect flow.

sources   the public single- and multi-turn sets in their Hub layout, one sample per
          turn; unreadable conversations quarantined whole, with their reasons
publish   the validated release, unfiltered: turns and conversations
"""

from __future__ import annotations

from prefect import flow

from mmcurate.benchmarks import register_part
from mmcurate.core.plural import counted
from mmcurate.flows import DEMO_CONFIG
from mmcurate.releases.cragmm.draft import cragmm_draft
from mmcurate.releases.curation import begin_curation
from mmcurate.tasks.ingest import ingest_source, load_samples
from mmcurate.tasks.plan import plan_run
from mmcurate.tasks.release import publish_release


@register_part("cragmm", "curate")
@flow(name="cragmm", log_prints=True)
def cragmm(config: str = str(DEMO_CONFIG), version: str | None = None, allow_incomplete: bool = False) -> str:
    run = begin_curation(config, "cragmm", version)  # before any work
    settings, cfg = run.settings, run.section
    ingested = [ingest_source(source, settings) for source in cfg.sources]
    samples, quarantine = load_samples(ingested, [source.limit for source in cfg.sources])
    plan_run(settings, run.benchmark, samples.num_rows)  # no model: logged
    draft = cragmm_draft(settings, run.version, run.run_id, ingested, samples, quarantine)
    release = publish_release(draft, settings.mirror("releases_root"), settings.image_store(), allow_incomplete)
    print(
        f"cragmm {draft.version}: {counted(samples.num_rows, 'turn')}, {quarantine.num_rows} quarantined -> {release}"
    )
    return str(release)


if __name__ == "__main__":
    cragmm()
