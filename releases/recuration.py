"""What every re-curation does before its first model call, for any benchmark.

A re-curation takes a published release (the parent) and new models, and writes the next
minor version. ``begin_recuration`` settles everything that can be settled before work
starts:

- the settings: with ``--config``, that file's (its relative paths resolve against its
  folder, and the release is written under its ``releases_root``); without, the parent's
  own resolved config as its manifest records it, whose paths are relative to the release
  folder, and the release is written beside the parent (``RELEASE/../<version>``, whatever
  the folder holding it is called: ``Recuration.folder``). A recorded workdir that does not
  exist where the release is now (the release was moved, so the path climbs to some folder
  of this machine that was never the build's) is refused with one line rather than
  created there: pass ``--config`` or set ``MMCURATE_WORKDIR``;
- the new models and their roles: ``--add-model SPEC`` gives the benchmark's default role
  (DeflectionBench: a gating model; RefLVQA: an inspector; ReflectV: a verifier),
  ``--add-model ROLE=SPEC`` another one (``BenchmarkSection.recuration_roles``). SPEC is a
  model name of the config, a YAML model file, or ``CATALOG#NAME``: the model NAME of a
  catalog (``models.catalog``), with the role the catalog gives it unless ROLE= says another;
- the parent's identity: ``{version, content_id}``, the content id being the manifest's
  ``sealed`` digest (the checksum of every sealed file's checksum). A re-curation writes
  beside its parent: if the target folder already holds another release under the
  parent's version (``--config`` pointing at another releases root), the new version
  would claim a parent that is not the one there, so it is refused;
- the recorded answers (``judging.recorded``): the parent's ledger, read for the models
  whose recorded identity is this run's, so the original models are never asked again;
- the version (the next minor unless given), checked against a release already there.

The flow then plans the added models' calls (``planning.recuration``) and refuses a plan
over its budget before any model is called.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmcurate.benchmarks import Benchmark, get
from mmcurate.core.config import ModelSpec, Settings, load_config
from mmcurate.core.errors import ConfigError
from mmcurate.core.ids import new_run_id
from mmcurate.core.images import ImageStore
from mmcurate.core.plural import listed
from mmcurate.judging.recorded import RecordedAnswers
from mmcurate.models.catalog import CatalogModel, read_catalog

from .changelog import render_changelog
from .diff import diff_releases
from .draft import ReleaseDraft
from .errors import ReleaseError
from .manifest import MANIFEST
from .reader import LEDGER_FILE, Release, open_release
from .rerun import NEW_VERSION, refuse_changed_version
from .versions import next_minor, parse_version


@dataclass
class Recuration:
    parent: Release
    benchmark: Benchmark
    settings: Settings
    section: Any  # the benchmark's config section, with the new models in their roles
    added: dict[str, list[str]]  # role -> names of the models added
    version: str
    run_id: str
    folder: Path  # where the benchmark's versions are: the new one is written here
    reusable: list[str] = field(default_factory=list)  # models whose recorded answers count

    @property
    def parent_record(self) -> dict[str, str]:
        """What the manifest records as the parent: its version and content id."""
        return parent_record(self.parent)

    @property
    def images(self) -> ImageStore:
        """The workdir's image store, where the parent's images are read from."""
        return self.settings.image_store()

    @property
    def new_models(self) -> list[str]:
        return [name for names in self.added.values() for name in names]

    def recorded(
        self,
        stage: str,
        verdicts: tuple[str, ...],
        models: list[str | None] | None = None,
        judge: str | None = None,
        part: str | None = None,
    ) -> RecordedAnswers:
        """The parent's answers of ``stage`` that settle an item (``verdicts``): of the reusable
        models unless ``models`` names others (a judge recorded under its component name);
        ``judge``: what graded them (default: the parent's judge); ``part``: see RecordedAnswers."""
        return RecordedAnswers(
            self.parent.path / LEDGER_FILE,
            stage,
            [m for m in (self.reusable if models is None else models) if m],
            judge or self.parent.manifest.judge_name,
            self.parent.version,
            verdicts,
            part,
        )


def content_id(release: Release) -> str:
    """The release's content id: the manifest's sealed digest of its files' checksums."""
    sealed = release.manifest.sealed
    if not sealed:
        raise ReleaseError(f"{release.path}: the manifest has no sealed digest (run `mmcurate verify`)")
    return sealed


def parent_record(release: Release) -> dict[str, str]:
    return {"version": release.version, "content_id": content_id(release)}


CATALOG_ENTRY = "#"  # --add-model CATALOG#NAME: the model NAME of a catalog file or server


def added_models(benchmark: str, roles: tuple[str, ...], specs: list[str]) -> list[tuple[str | None, str]]:
    """(role, spec) of each ``--add-model`` value: ``ROLE=SPEC``, or ``SPEC`` (role None: the
    catalog entry's role or the benchmark's default)."""
    if not roles:
        raise ConfigError(f"{benchmark} releases are not re-curated by mmcurate")
    if not specs:
        raise ConfigError("name at least one model to add (--add-model SPEC or ROLE=SPEC)")
    out: list[tuple[str | None, str]] = []
    for spec in specs:
        role, sep, rest = spec.partition("=")
        if sep and role in roles:
            out.append((role, rest))
        elif sep and role.isidentifier():
            raise ConfigError(f"--add-model {spec}: {benchmark} takes the roles {', '.join(roles)}")
        else:
            out.append((None, spec))
    return out


def resolve_added(
    settings: Settings, spec: str, catalogs: dict[str, dict[str, CatalogModel]]
) -> tuple[ModelSpec, CatalogModel | None]:
    """The model ``spec`` names, added to ``settings``, and its catalog entry when it came from
    one: a model name of the config, a YAML model file, or ``CATALOG#NAME``, the model NAME of a
    catalog (a YAML file or an OpenAI-compatible server's model list, ``models.catalog``), so a
    model the maintainers list in their catalog is defined there only. ``catalogs``: the
    catalogs read so far by source, each read once however many of its models are added."""
    source, mark, name = spec.rpartition(CATALOG_ENTRY)
    if not mark or spec in settings.models or Path(spec).is_file():
        return settings.add_model(spec), None
    if not source or not name:
        raise ConfigError(
            f"--add-model {spec}: CATALOG#NAME takes a catalog (a YAML file or a server) and a model name"
        )
    if source not in catalogs:
        catalogs[source] = {m.spec.name: m for m in read_catalog(source)}
    entries = catalogs[source]
    if name not in entries:
        raise ConfigError(f"--add-model {spec}: catalog {source} has no model {name!r} (it has {listed(entries)})")
    entry = entries[name]
    return settings.register_model(entry.spec, entry.where), entry


def check_roles(models: list[CatalogModel], benchmark: str, roles: tuple[str, ...]) -> None:
    """A catalog role the benchmark's re-curation does not take: one line naming the catalog entry."""
    for model in models:
        if model.role is not None and model.role not in roles:
            raise ConfigError(
                f"{model.where}: role {model.role!r} is not one of {benchmark}'s re-curation roles "
                f"({', '.join(roles) or 'none: its releases are not re-curated'})"
            )


def _recorded_settings(parent: Release) -> Settings:
    """The parent's resolved config, paths against the release folder; refused when its workdir
    lies nowhere that exists (the release was moved away from where it was built)."""
    settings = Settings.from_resolved(parent.manifest.config, parent.path)
    recorded = parent.manifest.config.get("workdir")
    from_record = recorded is not None and (parent.path / recorded).resolve() == settings.workdir.resolve()
    if from_record and not settings.workdir.is_dir():
        raise ConfigError(
            f"{parent.path}: its recorded workdir {recorded} resolves to {settings.workdir}, which does "
            "not exist here (was the release moved?); pass --config FILE or set MMCURATE_WORKDIR"
        )
    return settings


def recuration_settings(
    parent: Release, config: Path | str | None, add_models: list[str]
) -> tuple[Settings, dict[str, list[str]]]:
    """The settings of re-curating ``parent`` with ``add_models`` and the names added per role."""
    settings = load_config(config) if config else _recorded_settings(parent)
    section = settings.section(parent.benchmark)
    roles = section.recuration_roles()
    added: dict[str, list[str]] = {}
    catalogs: dict[str, dict[str, CatalogModel]] = {}
    for given, spec in added_models(parent.benchmark, roles, add_models):
        model, entry = resolve_added(settings, spec, catalogs)
        if entry is not None and given is None:
            check_roles([entry], parent.benchmark, roles)
        role = given or (entry.role if entry else None) or roles[0]
        section.add_recuration_model(role, model.name)
        added.setdefault(role, []).append(model.name)
    try:  # a model that cannot serve its role (a verifier of marks without vision): as at config load
        section.check_models(settings.models)
    except ValueError as exc:
        raise ConfigError(f"--add-model: {exc}") from None
    return settings, added


def reusable_models(parent: Release, settings: Settings) -> list[str]:
    """The parent's models whose recorded identity is the one this run would call."""
    out = []
    for recorded in parent.manifest.models:
        name = recorded.name
        spec = settings.models.get(name)
        if spec is not None and name not in out and recorded.identity() == spec.identity():
            out.append(name)
    return out


def versions_folder(parent: Release, config: Path | str | None, settings: Settings) -> Path:
    """Where the new version is written: beside the parent, or under ``--config``'s releases root."""
    return settings.releases_root / parent.benchmark if config else parent.path.resolve().parent


def check_parent_beside(folder: Path, parent: Release) -> None:
    """Refuse writing the new version into ``folder`` beside another release of the parent's version."""
    sibling = folder / parent.version
    if (sibling / MANIFEST).is_file() and sibling.resolve() != parent.path.resolve():
        there = open_release(sibling)
        if there.manifest.sealed != parent.manifest.sealed:
            raise ReleaseError(
                f"{sibling} is another {parent.benchmark} {parent.version} than {parent.path} "
                "(their content ids differ): a re-curation is written beside the release it "
                "re-curates; use that release's folder, or a config whose releases_root has it"
            )


def begin_recuration(
    release: Path | str,
    config: Path | str | None,
    add_models: list[str],
    version: str | None = None,
    remedy: str = NEW_VERSION,
) -> Recuration:
    """The checked opening of a re-curation of ``release`` (see the module docstring);
    ``remedy``: what a refusal of a changed version tells the user to do, in the command's options."""
    parent = open_release(release)
    content_id(parent)
    benchmark = get(parent.benchmark)
    settings, added = recuration_settings(parent, config, add_models)
    version = version or next_minor(parent.version)
    parse_version(version)
    folder = versions_folder(parent, config, settings)
    check_parent_beside(folder, parent)
    refuse_changed_version(settings, parent.benchmark, version, remedy, folder)
    return Recuration(
        parent,
        benchmark,
        settings,
        settings.section(parent.benchmark),
        added,
        version,
        new_run_id(),
        folder,
        reusable_models(parent, settings),
    )


def describe_changes(run: Recuration, draft: ReleaseDraft) -> ReleaseDraft:
    """Fill the draft's removal stamps (``removed``) and its CHANGELOG.md from the diff with the parent."""
    diff = diff_releases(run.parent, draft)
    draft.removed = diff.removed_records()
    new_ids = draft.tables[draft.kind.samples_config].column("sample_id").to_pylist()
    draft.changelog = render_changelog(
        run.parent, diff, new_ids, run.added, run.reusable, run.settings.workdir, content_id(run.parent)
    )
    return draft
