"""The manifest as a typed, versioned model: what every reader of ``manifest.json`` relies on.

``format`` is the manifest's version: 1 sealed the files only, 2 sealed the body too
(``sealed_body``), 3 writes the JSON Schema of this model beside it (``manifest.schema.json``,
a sealed file) so a reader without mmcurate knows every field. Older manifests still read:
every field a format-1 manifest lacks has a default, and entries this model does not name
are kept (``extra="allow"``), as are the entries of the records inside it (a model's identity,
a source file's checksums). Statistics tables that vary per benchmark stay loosely typed.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

MANIFEST_FORMAT = 3  # 3: its JSON Schema is written into the release (manifest.schema.json)
SCHEMA_FILE = "manifest.schema.json"


class Record(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    def recorded(self) -> dict[str, Any]:
        """The entries as the manifest holds them (no default added)."""
        return self.model_dump(exclude_unset=True)


class FileEntry(Record):
    sha256: str
    size: int


class SourceFile(Record):
    path: str | None = None
    sha256: str | None = None
    size: int | None = None


class ParentRecord(Record):
    version: str
    content_id: str | None = None


class ModelRecord(Record):
    """A model as the release recorded it: its role and ``ModelSpec.identity()``."""

    name: str
    role: str | None = None

    def identity(self) -> dict[str, Any]:
        return {key: value for key, value in self.recorded().items() if key != "role"}


class JudgeRecord(Record):
    name: str | None = None
    image: str | None = None  # RefLVQA: the image entailment judge


class CodeVersion(Record):
    package: str | None = None
    git_commit: str | None = None


class Counts(Record):
    rows: dict[str, int] = Field(default_factory=dict)  # per config
    bytes: dict[str, int] = Field(default_factory=dict)  # per config
    per_source: dict[str, Any] = Field(default_factory=dict)
    per_stage: dict[str, Any] = Field(default_factory=dict)
    run_id: str | None = None


class Manifest(Record):
    """``manifest.json`` of a release (see ``releases.manifest`` for what is sealed how)."""

    format: int = 1
    benchmark: str
    version: str
    pretty_name: str | None = None
    split: str | None = None
    parent: ParentRecord | str | None = None  # {version, content_id}; a bare version before content ids
    created: str | None = None
    code_version: CodeVersion | None = None
    config: dict[str, Any] = Field(default_factory=dict)  # the resolved configuration, paths relative
    models: list[ModelRecord] = Field(default_factory=list)
    judge: JudgeRecord | None = None
    components: dict[str, str | None] = Field(default_factory=dict)  # stand-ins by role
    indexes: list[dict[str, Any]] | None = None
    source_files: list[SourceFile] = Field(default_factory=list)
    inputs: dict[str, str] = Field(default_factory=dict)  # sha256 of every file the config names
    counts: Counts
    statistics: dict[str, Any] = Field(default_factory=dict)  # named tables, per benchmark
    removed: list[dict[str, Any]] = Field(default_factory=list)
    seed: int | None = None
    k_min: int | None = None
    notes: list[str] = Field(default_factory=list)
    incomplete: dict[str, Any] | None = None
    shards: dict[str, list[str]]  # config -> its Parquet files, the first config one row per sample
    plots: dict[str, str] = Field(default_factory=dict)  # title -> file in plots/
    exports: dict[str, Any] = Field(default_factory=dict)  # training layouts written (ReflectV's SFT)
    lmms_eval: dict[str, Any] | None = None  # its evaluation as lmms-eval tasks (lmms_eval/): group, tasks, note
    files: dict[str, FileEntry]  # every sealed file
    sealed: str | None = None  # sha256 of ``files``: the release's content id
    sealed_body: dict[str, str] | None = None  # sha256 of every other entry

    @property
    def judge_name(self) -> str | None:
        return self.judge.name if self.judge else None


def manifest_schema() -> dict[str, Any]:
    """The JSON Schema of the manifest this code writes (format ``MANIFEST_FORMAT``)."""
    return {
        **Manifest.model_json_schema(),
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"mmcurate release manifest, format {MANIFEST_FORMAT}",
    }


def schema_text() -> str:
    return json.dumps(manifest_schema(), indent=2, sort_keys=True) + "\n"
