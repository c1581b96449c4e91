"""What every curation run does before its first stage, for any benchmark.

``begin_curation`` loads the config and checks everything that can be checked before work
starts: the benchmark's section exists, its sources are ones the benchmark reads, with valid
adapter options and readable folders, the version is a semantic version, and a release already published
under it was made with the same configuration and models (else one line names the
difference). The command line calls it before Prefect starts, and the flow calls it again
as its first step (a deployment run has no command line before it). It sits with
``recuration.begin_recuration``, above the registry it asks and the sources it checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmcurate.benchmarks import Benchmark, get
from mmcurate.core.config import Settings, load_config
from mmcurate.core.errors import ConfigError
from mmcurate.core.ids import new_run_id
from mmcurate.core.storage import reading
from mmcurate.sources import check_source

from .rerun import refuse_changed_version
from .versions import parse_version


@dataclass
class Curation:
    benchmark: Benchmark
    settings: Settings
    section: Any  # the benchmark's section of the config
    version: str
    run_id: str


def check_source_names(benchmark: Benchmark, settings: Settings) -> None:
    for where, source in settings.sources_of(benchmark.name):
        if source.name not in benchmark.sources:
            raise ConfigError(f"{where}: source {source.name!r}: {benchmark.name} reads {', '.join(benchmark.sources)}")
        check_source(source.name, source.options, where)


def begin_curation(config: str | Path, name: str, version: str | None = None) -> Curation:
    """The checked settings of a curation run of benchmark ``name`` and its run id."""
    benchmark = get(name)
    settings = load_config(config)
    releases = settings.mirror("releases_root")
    with reading(f"releases_root {releases.remote}"):
        releases.pull_children(name)  # an object store's versions: read as local ones
    section = benchmark.section_of(settings)
    check_source_names(benchmark, settings)
    settings.check_sources(name)
    version = version or section.version
    parse_version(version)
    refuse_changed_version(settings, name, version)
    return Curation(benchmark, settings, section, version, new_run_id())
