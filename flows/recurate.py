"""Re-curation when stronger models appear, for any benchmark: the next minor version at the
cost of the new models' calls only.

    open       the release (the parent), its config or another, the new models in their roles;
               the parent's ledger holds every original model's answers, which decide for those
               models: they are not asked again, with or without the response cache
    plan       the new models' calls, refused over --max-calls / --max-cost
    recheck    the benchmark's checks again with the new models (``Benchmark.recurate`` in the
               registry: DeflectionBench's Stage I and Stage III, ``deflectionbench/recurate.py``;
               RefLVQA's image necessity and citations, ``reflvqa/recurate.py``; ReflectV's
               teachers and verifiers, ``reflectv/recurate.py``), then near-duplicates within the
               release, against earlier versions (the parent) and named releases
    publish    the next minor version beside the release: removal stamps, CHANGELOG.md, the
               parent recorded by version and content id; the plan beside what was spent
"""

from __future__ import annotations

from prefect import flow

import mmcurate.flows.builtin  # noqa: F401  registers each benchmark's re-curation steps
from mmcurate.tasks.recuration import open_recuration, publish_recuration


@flow(name="recurate-release", log_prints=True)
def recurate_release(
    release: str,
    add_model: list[str],
    config: str | None = None,
    version: str | None = None,
    allow_incomplete: bool = False,
    max_calls: int | None = None,
    max_cost: float | None = None,
) -> str:
    """Re-curate ``release`` with the models ``add_model`` names (SPEC or ROLE=SPEC)."""
    run, bill = open_recuration(release, config, add_model, version, max_calls, max_cost)  # before any model call
    recurated = run.benchmark.recuration_steps()(run)
    path = publish_recuration(run, recurated.draft, allow_incomplete, bill, recurated.calls)
    print(
        f"recurated {run.parent.benchmark} {run.parent.version} -> {recurated.draft.version} with "
        f"{', '.join(run.new_models)}: {recurated.summary()} -> {path}"
    )
    return str(path)
