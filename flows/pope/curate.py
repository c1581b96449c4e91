"""POPE probes (Kestrel's benchmark, seed 000 4.1) as a Prefect flow.

sources      published POPE question files (``pope``), or object annotations from which
             probes are built by POPE's random / popular / adversarial negative sampling
             (``pope_objects``)
balance      every split as many "yes" as "no", as POPE publishes them
publish      the validated release: one config ``probes`` with a ``split`` column
"""

from __future__ import annotations

from prefect import flow

from mmcurate.annotation.pope.balance import BalanceProbes
from mmcurate.benchmarks import register_part
from mmcurate.core.plural import counted
from mmcurate.flows import DEMO_CONFIG
from mmcurate.releases.curation import begin_curation
from mmcurate.releases.pope.draft import pope_draft
from mmcurate.tasks.ingest import ingest_source, load_samples
from mmcurate.tasks.plan import plan_run
from mmcurate.tasks.release import publish_release
from mmcurate.tasks.stages import run_stage


@register_part("pope", "curate")
@flow(name="pope", log_prints=True)
def pope(config: str = str(DEMO_CONFIG), version: str | None = None, allow_incomplete: bool = False) -> str:
    run = begin_curation(config, "pope", version)  # before any work
    settings, cfg, run_id = run.settings, run.section, run.run_id

    ingested = [ingest_source(source, settings) for source in cfg.sources]
    samples, quarantine = load_samples(ingested, [source.limit for source in cfg.sources])
    plan_run(settings, run.benchmark, samples.num_rows)  # no planner: a log line
    balanced = run_stage(BalanceProbes(cfg.seed), samples, settings, run_id)

    draft = pope_draft(settings, run.version, run_id, ingested, samples, quarantine, balanced)
    release = publish_release(draft, settings.mirror("releases_root"), settings.image_store(), allow_incomplete)
    print(
        f"pope {draft.version}: {counted(balanced.kept.num_rows, 'probe')} ({balanced.counts['dropped']} dropped to balance) "
        f"-> {release}"
    )
    return str(release)


if __name__ == "__main__":
    pope()
