"""``mmcurate watch``: which models of a catalog a release was not curated with, and the bill
of re-curating it with them.

A model is known when the release's manifest records a model of that name with the same
identity (backend, model, revision, vision: what ``ModelSpec.identity`` records; the
manifest's ``models`` hold every model of every role, the ones added by earlier
re-curations too); any other is new. A new model that shares a known model's name but not
its identity is said with the fields that differ, and left out of the re-curation (ledgers
and caches know a model by its name: it needs its own name in the catalog). New models are
proposed newest first (``released``), each in its catalog role (checked against the
benchmark's, naming the catalog entry) or the benchmark's default re-curation role; the plan
is the re-curation's (``planning.recuration``): calls, tokens, device-hours and cost of the
new models only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from mmcurate.core.config import Settings, load_config
from mmcurate.core.plural import SHOWN, counted
from mmcurate.models.catalog import CatalogModel, read_catalog, spec_file
from mmcurate.releases.reader import Release, list_versions, open_release
from mmcurate.releases.recuration import Recuration, begin_recuration, check_roles

from . import builtin  # noqa: F401  registers each benchmark's re-curation planner
from .plan import Plan


@dataclass
class Proposal:
    release: Release
    catalog: str
    config: Path | str | None
    models: list[CatalogModel]  # everything the catalog lists
    new: list[CatalogModel] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)  # new model -> how it differs from the release's namesake
    add_models: list[str] = field(default_factory=list)  # --add-model values (ROLE=spec file)
    run: Recuration | None = None  # the re-curation with the new models; None: nothing is new
    plan: Plan | None = None

    def render(self, hint: bool = True) -> str:
        """What watch prints; ``hint``: end with the command that runs the re-curation (not when
        it is being run)."""
        parent = self.release
        used = ", ".join(f"{m.name} ({m.role or 'model'})" for m in parent.manifest.models)
        lines = [
            f"{parent.benchmark} {parent.version} was curated with: {used or 'no model'}",
            f"catalog {self.catalog}: {counted(len(self.models), 'model')}, {len(self.new)} new",
        ]
        for model in self.new[:SHOWN]:
            spec = model.spec
            lines.append(
                f"  + {spec.name}: {spec.backend} {spec.model or spec.gguf or ''} @ {spec.revision}, "
                f"released {model.released or 'unknown'}, role {model.role or self._default_role()}"
                + (f" ({model.note})" if model.note else "")
            )
            if spec.name in self.renamed:
                lines.append(
                    f"    not the release's {spec.name}: {self.renamed[spec.name]}; ledgers and caches know "
                    "a model by its name: give it its own name in the catalog to re-curate with it"
                )
        if len(self.new) > SHOWN:
            lines.append(f"  and {len(self.new) - SHOWN:,} more")
        if self.run is None or self.plan is None:
            lines.append(
                "nothing to re-curate: "
                + (
                    "the new models need names of their own"
                    if self.new
                    else "the release was curated with every model of the catalog"
                )
            )
            return "\n".join(lines) + "\n"
        lines += ["", f"re-curation {parent.version} -> {self.run.version} with the new models:", self.plan.render()]
        config = f" --config {self.config}" if self.config else ""
        if hint:
            lines.append(
                f"run it: mmcurate watch {parent.path} --catalog {self.catalog}{config} --run "
                "[--max-calls N] [--max-cost USD] [--target-dir DIR | --repo-id ORG/NAME]"
            )
        return "\n".join(lines) + "\n"

    def _default_role(self) -> str:
        section_roles = self.run.section.recuration_roles() if self.run else ()
        return section_roles[0] if section_roles else "default"


IDENTITY = ("backend", "model", "revision", "vision")  # what a release records of a model, besides its name


def identity_differences(recorded: dict[str, Any], model: CatalogModel) -> list[str]:
    """``field recorded -> catalog`` for each identity field of a same-named model that differs."""
    mine = model.spec.identity()
    return [f"{key} {recorded.get(key)} -> {mine[key]}" for key in IDENTITY if recorded.get(key) != mine[key]]


def propose(release: Path | str, catalog: str, config: Path | str | None, specs: Path) -> Proposal:
    """The new models of ``catalog`` for ``release`` and the plan of re-curating with them; their
    spec files are written to ``specs`` (a scratch folder the re-curation reads them from)."""
    parent = open_release(release)
    models = read_catalog(catalog)
    recorded = {m.name: m.identity() for m in parent.manifest.models}
    differ = {m.spec.name: identity_differences(recorded[m.spec.name], m) for m in models if m.spec.name in recorded}
    new = sorted(
        (m for m in models if m.spec.name not in recorded or differ[m.spec.name]),
        key=lambda m: (m.released or date.min, m.spec.name),
        reverse=True,
    )
    renamed = {name: ", ".join(fields) for name, fields in differ.items() if fields}
    proposal = Proposal(parent, catalog, config, models, new, renamed)
    added = [m for m in new if m.spec.name not in renamed]
    if not added:
        return proposal
    settings = load_config(config) if config else Settings.from_resolved(parent.manifest.config, parent.path)
    check_roles(added, parent.benchmark, settings.section(parent.benchmark).recuration_roles())
    proposal.add_models = [f"{m.role}={spec_file(m, specs)}" if m.role else str(spec_file(m, specs)) for m in added]
    newest = (list_versions(settings.releases_root, parent.benchmark) or [parent.version])[-1]
    remedy = (
        f"watch the newest release instead: mmcurate watch {settings.releases_root / parent.benchmark / newest} "
        f"--catalog {catalog}"
        if newest != parent.version
        else "give watch --config a config whose releases_root holds no other re-curation of this release"
    )
    proposal.run = begin_recuration(release, config, proposal.add_models, remedy=remedy)
    proposal.plan = proposal.run.benchmark.recuration_planner()(proposal.run)
    return proposal
