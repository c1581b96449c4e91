"""ReflectV curation (MIRROR, seed paper 002, Figure 3) as a Prefect flow.

sources      image QA in published layouts (GQA, TextVQA, DocVQA, ChartQA) tagged with
             their domain, and ready-made FIRE dialogues
dialogue     a student answers, a teacher with the ground truth scores 0-10 and gives feedback
trajectory   keep strictly ascending scores that end at 10 with a right final answer
reflection   grounding keywords (dense perception: the question's phrase; its marks placed by the ground truth)
grounding    locate each keyword, draw marks in the named colour and type, insert caption and marks
             into the teacher's feedback, rewrite it as first-person reflection (Figures 11, 12)
visual       a vision model checks that the marks show what the reflection names
format       verified chains as multi-turn trajectories, the rest as QA pairs, at rho
near-dups    within the release, against earlier versions and named releases: flagged
publish      the validated release: trajectories, dialogues, Figure 5 statistics; the plan
             (recorded before the first model call) beside what the run spent
"""

from __future__ import annotations

from prefect import flow

from mmcurate.annotation.reflectv.dialogue import BuildDialogues
from mmcurate.annotation.reflectv.formatting import FormatTrajectories
from mmcurate.annotation.reflectv.grounding import GroundAndMark
from mmcurate.annotation.reflectv.reflection import WriteReflections
from mmcurate.annotation.reflectv.trajectory import TrajectoryFilter
from mmcurate.annotation.reflectv.visual import VisualCheck
from mmcurate.benchmarks import register_part
from mmcurate.core.errors import ConfigError
from mmcurate.flows import DEMO_CONFIG
from mmcurate.releases.curation import begin_curation
from mmcurate.releases.near_duplicates import near_duplicate_stage
from mmcurate.releases.reflectv.draft import reflectv_draft
from mmcurate.tasks.ingest import ingest_source, load_samples
from mmcurate.tasks.plan import plan_run, report_spent
from mmcurate.tasks.release import publish_release
from mmcurate.tasks.stages import run_stage


@register_part("reflectv", "curate")
@flow(name="reflectv", log_prints=True)
def reflectv(config: str = str(DEMO_CONFIG), version: str | None = None, allow_incomplete: bool = False) -> str:
    run = begin_curation(config, "reflectv", version)  # before any work
    settings, cfg, run_id = run.settings, run.section, run.run_id
    near = near_duplicate_stage(settings, "reflectv", run.version)  # its references read
    if cfg.recheck_teachers or cfg.recheck_verifiers:
        raise ConfigError(
            "reflectv.recheck_teachers and recheck_verifiers are set by `mmcurate recurate` "
            "(re-checks of a release); a curation run uses `teacher` and `verifier`"
        )

    ingested = [ingest_source(source, settings) for source in cfg.sources]
    samples, quarantine = load_samples(ingested, [source.limit for source in cfg.sources])
    bill = plan_run(settings, run.benchmark, samples.num_rows)  # before any model call

    dialogues = run_stage(BuildDialogues(cfg.student, cfg.teacher, cfg.max_turns), samples, settings, run_id)
    filtered = run_stage(TrajectoryFilter(), dialogues.kept, settings, run_id)
    reflected = run_stage(
        WriteReflections(cfg.keywords, cfg.rewriter, cfg.collapse_revealing_feedback, cfg.caption_order),
        filtered.kept,
        settings,
        run_id,
    )
    rewriter = cfg.rewriter if cfg.caption_order == "before_rewrite" else None  # Figure 12 after Figure 11
    grounded = run_stage(
        GroundAndMark(cfg.grounding, cfg.segmenter, cfg.colors, cfg.mark_types, cfg.seed, cfg.captions, rewriter),
        reflected.kept,
        settings,
        run_id,
    )
    verified = run_stage(VisualCheck(cfg.verifier), grounded.kept, settings, run_id)
    formatted = run_stage(FormatTrajectories(cfg.rho, cfg.seed, cfg.rho_rule), verified.kept, settings, run_id)

    deduped = run_stage(near, formatted.kept, settings, run_id)  # near-duplicates

    stages = [dialogues, filtered, reflected, grounded, verified, formatted, deduped]
    draft = reflectv_draft(settings, run.version, run_id, ingested, samples, quarantine, stages)
    release = publish_release(draft, settings.mirror("releases_root"), settings.image_store(), allow_incomplete)
    report_spent(bill, [row for stage in stages for row in stage.calls])
    print(
        f"reflectv {draft.version}: {formatted.counts['multi_turn']} multi-turn trajectories and "
        f"{formatted.counts['single_turn']} QA pairs -> {release}"
    )
    return str(release)


if __name__ == "__main__":
    reflectv()
