"""``mmcurate watch``: which models of a catalog a release was not curated with, and the bill
of re-curating it with them.

A model is new when the release's manifest names no model of that name (its ``models``
hold every model of every role, the ones added by earlier re-curations too). New models
are proposed newest first (``released``), each in its catalog role or the benchmark's
default re-curation role; the plan is the re-curation's (``planning.recuration``):
calls, tokens, device-hours and cost of the new models only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from mmcurate.core.plural import counted
from mmcurate.models.catalog import CatalogModel, read_catalog, spec_file
from mmcurate.releases.reader import Release, open_release
from mmcurate.releases.recuration import Recuration, begin_recuration

from .plan import Plan


@dataclass
class Proposal:
    release: Release
    catalog: str
    config: Path | str | None
    models: list[CatalogModel]  # everything the catalog lists
    new: list[CatalogModel] = field(default_factory=list)
    add_models: list[str] = field(default_factory=list)  # --add-model values (ROLE=spec file)
    run: Recuration | None = None  # the re-curation with the new models; None: nothing is new
    plan: Plan | None = None

    def render(self, hint: bool = True) -> str:
        """What watch prints; ``hint``: end with the command that runs the re-curation (not when
        it is being run)."""
        parent = self.release
        used = ", ".join(f"{m.name} ({m.role or 'model'})" for m in parent.manifest.models)
        lines = [f"{parent.benchmark} {parent.version} was curated with: {used or 'no model'}",
                 f"catalog {self.catalog}: {counted(len(self.models), 'model')}, {len(self.new)} new"]
        for model in self.new:
            spec = model.spec
            lines.append(f"  + {spec.name}: {spec.backend} {spec.model or spec.gguf or ''} @ {spec.revision}, "
                         f"released {model.released or 'unknown'}, role {model.role or self._default_role()}"
                         + (f" ({model.note})" if model.note else ""))
        if self.run is None or self.plan is None:
            lines.append("nothing to re-curate: the release was curated with every model of the catalog")
            return "\n".join(lines) + "\n"
        lines += ["", f"re-curation {parent.version} -> {self.run.version} with the new models:", self.plan.render()]
        config = f" --config {self.config}" if self.config else ""
        if hint:
            lines.append(f"run it: mmcurate watch {parent.path} --catalog {self.catalog}{config} --run "
                         "[--max-calls N] [--max-cost USD] [--target-dir DIR | --repo-id ORG/NAME]")
        return "\n".join(lines) + "\n"

    def _default_role(self) -> str:
        section_roles = self.run.section.recuration_roles() if self.run else ()
        return section_roles[0] if section_roles else "default"


def propose(release: Path | str, catalog: str, config: Path | str | None, specs: Path) -> Proposal:
    """The new models of ``catalog`` for ``release`` and the plan of re-curating with them; their
    spec files are written to ``specs`` (a scratch folder the re-curation reads them from)."""
    parent = open_release(release)
    models = read_catalog(catalog)
    used = {m.name for m in parent.manifest.models}
    new = sorted((m for m in models if m.spec.name not in used),
                 key=lambda m: (m.released or date.min, m.spec.name), reverse=True)
    proposal = Proposal(parent, catalog, config, models, new)
    if not new:
        return proposal
    proposal.add_models = [f"{m.role}={spec_file(m, specs)}" if m.role else str(spec_file(m, specs)) for m in new]
    proposal.run = begin_recuration(release, config, proposal.add_models)  # a role it does not take: one line
    proposal.plan = proposal.run.benchmark.recuration_planner()(proposal.run)
    return proposal
