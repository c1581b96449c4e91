"""``build_plan``: one benchmark's plan from a config, a sample count and retention rates."""
from __future__ import annotations

from mmcurate.core.config import DeflectionBenchConfig, Settings
from mmcurate.core.errors import ConfigError

from .deflection import offered_negatives, plan_deflectionbench
from .inputs import plan_input
from .kb import plan_kb
from .plan import Plan
from .rates import paper_deflection, paper_reflvqa, release_deflection, release_reflvqa
from .reflvqa import plan_reflvqa

PAPER = "paper"
BENCHMARKS = ("deflectionbench", "reflvqa")


def oracle_rule(cfg: DeflectionBenchConfig) -> str:
    """Stage III's rule. Until the config carries the switch (``gating.oracle_rule``, issue 15),
    the stage settles a sample on a CORRECT answer only: the ``none_correct`` rule."""
    return getattr(cfg.gating, "oracle_rule", "none_correct")


def build_plan(settings: Settings, benchmark: str, samples: int | None = None, retention: str | None = None,
               kb_pages: int | None = None) -> Plan:
    """The plan of ``benchmark`` under ``settings``: ``samples`` (else counted, see
    ``planning.inputs``) at the retention of ``retention`` (``paper``, the default, or a release folder);
    DeflectionBench's also sizes embedding its knowledge base (``kb_pages``, else counted: ``planning.kb``)."""
    if benchmark not in BENCHMARKS:
        raise ConfigError(f"unknown benchmark {benchmark!r}; known: {', '.join(BENCHMARKS)}")
    if samples is not None and samples < 0:
        raise ConfigError(f"--samples must be >= 0, got {samples}")
    from_paper = retention in (None, PAPER)
    if benchmark == "deflectionbench":
        cfg = settings.section(benchmark)
        rule = oracle_rule(cfg)
        rates = paper_deflection(len(cfg.gating.pool), offered_negatives(cfg.retrieval)) if from_paper \
            else release_deflection(retention, rule)
        plan = plan_deflectionbench(settings, plan_input(settings, cfg.sources, samples), rates, rule)
        plan.kb = plan_kb(cfg.retrieval, kb_pages)
        return plan
    cfg = settings.section(benchmark)
    rates = paper_reflvqa(len(cfg.inspectors), cfg.max_right_inspectors) if from_paper else release_reflvqa(retention)
    return plan_reflvqa(settings, plan_input(settings, [cfg.source], samples), rates)
