"""A benchmark's plan from a config, a sample count and retention rates: the ``plan`` of each
benchmark in the registry (``mmcurate.benchmarks``); and the plan of an evaluation of one
model on a release (a benchmark's ``evaluation_plan``); each registered as its benchmark's part."""

from __future__ import annotations

import tempfile
from typing import Any

import pyarrow as pa

from mmcurate.benchmarks import deflectionbench, reflectv, reflvqa, register_part
from mmcurate.core.config import Settings
from mmcurate.core.errors import ConfigError
from mmcurate.core.images import ImageStore
from mmcurate.evaluation.reflvqa.subset import choose_pairs
from mmcurate.releases.reader import Release
from mmcurate.releases.reflvqa.tables import KNOWLEDGE_BASE
from mmcurate.releases.unembed import canonical_rows

from .deflectionbench.curation import offered_negatives, plan_deflectionbench
from .inputs import plan_input
from .kb import plan_kb
from .plan import Plan
from .rates import (
    paper_deflection,
    paper_reflectv,
    paper_reflvqa,
    release_deflection,
    release_reflectv,
    release_reflvqa,
)
from .reflectv.curation import plan_reflectv
from .reflvqa.curation import plan_reflvqa
from .reflvqa.evaluation import plan_reflvqa_evaluation

PAPER = "paper"


def _release(samples: int | None, retention: str | None) -> str | None:
    """The release folder the retention comes from; None: the paper's (``None`` or ``paper``)."""
    if samples is not None and samples < 0:
        raise ConfigError(f"--samples must be >= 0, got {samples}")
    return None if retention in (None, PAPER) else retention


@register_part("deflectionbench", "plan")
def deflection_bill(
    settings: Settings, samples: int | None = None, retention: str | None = None, kb_pages: int | None = None
) -> Plan:
    """DeflectionBench under ``settings``: ``samples`` (else counted, see ``planning.inputs``) at
    the retention of ``retention`` (``paper``, the default, or a release folder), and embedding
    its knowledge base (``kb_pages``, else counted: ``planning.kb``)."""
    cfg = deflectionbench.DeflectionBenchConfig.of(settings)
    rule = cfg.gating.oracle_rule
    folder = _release(samples, retention)
    rates = (
        paper_deflection(len(cfg.gating.pool), offered_negatives(cfg))
        if folder is None
        else release_deflection(folder, rule)
    )
    given = plan_input(settings, cfg.sources, samples)
    plan = plan_deflectionbench(settings, given, rates, rule)
    plan.kb, plan.uncounted = plan_kb(cfg.retrieval, kb_pages), given.uncounted
    return plan


@register_part("reflvqa", "plan")
def reflvqa_bill(settings: Settings, samples: int | None = None, retention: str | None = None) -> Plan:
    """RefLVQA under ``settings`` (see ``deflection_bill``)."""
    cfg = reflvqa.RefLVQAConfig.of(settings)
    folder = _release(samples, retention)
    rates = paper_reflvqa(len(cfg.inspectors), cfg.max_right_inspectors) if folder is None else release_reflvqa(folder)
    given = plan_input(settings, [cfg.source], samples)
    plan = plan_reflvqa(settings, given, rates)
    plan.uncounted = given.uncounted
    return plan


@register_part("reflectv", "plan")
def reflectv_bill(settings: Settings, samples: int | None = None, retention: str | None = None) -> Plan:
    """ReflectV under ``settings`` (see ``deflection_bill``)."""
    cfg = reflectv.ReflectVConfig.of(settings)
    folder = _release(samples, retention)
    rates = paper_reflectv() if folder is None else release_reflectv(folder)
    given = plan_input(settings, cfg.sources, samples)
    plan = plan_reflectv(settings, given, rates)
    plan.uncounted = given.uncounted
    return plan


@register_part("reflvqa", "evaluation_plan")
def reflvqa_evaluation_bill(settings: Settings, release: Release, model: str, options: dict[str, Any]) -> Plan:
    """The evaluation grid of ``model`` on a RefLVQA ``release`` (``options``: settings,
    queries and subset, checked by the benchmark's evaluation), read without touching the workdir."""
    with tempfile.TemporaryDirectory() as scratch:  # the rows' images go to a throw-away store
        store = ImageStore(scratch)
        cfg = reflvqa.RefLVQAEvalConfig.of(settings)
        qa, _ = choose_pairs(
            canonical_rows(release, store, "qa"), cfg.verified_labels, options.get("subset", cfg.subset)
        )
        documents = pa.Table.from_pylist(canonical_rows(release, store, "knowledge_base"), schema=KNOWLEDGE_BASE)
    return plan_reflvqa_evaluation(
        settings, settings.add_model(model).name, qa, documents, options["settings"], options["queries"]
    )
