"""Recognising a rerun, and refusing a different release under an existing version.

A release is identified by its data, the configuration that decides its content, the
models that made it and the content of every input: the raw source files (their sha256, as
the manifest records them) and every local file the benchmark's section, its models and the
judge name (a scripted model's rules, a knowledge base, a tokenizer: the manifest's
``inputs``, sha256 by config field). A draft equal to the release of its version in all of
these publishes nothing (a rerun); one that differs in any is refused with one line naming
what differs. An input a release written before did not record is not compared. Where and
how a run executes (workdir, releases root, cache, task runner, a model's endpoint,
concurrency, timeouts, the files' places) is not identity: the same release can be rebuilt
on a Dask cluster or another machine.

``refuse_changed_version`` compares the configuration before any work is done, so a run
whose settings differ from the release of its version stops before the pipeline starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from mmcurate.core.config import Settings
from mmcurate.core.errors import MmcurateError
from mmcurate.core.plural import counted, listed
from mmcurate.core.tables import SpilledTable, table_batches
from mmcurate.releases.draft import ReleaseDraft
from mmcurate.releases.errors import ReleaseExists
from mmcurate.releases.manifest import MANIFEST, input_digests, portable, source_digests, source_file_entries
from mmcurate.releases.reader import Release, open_release

SECTION_EXECUTION = ("version", "shard_size")  # a section's version, and how a streamed run cuts its samples
MODEL_EXECUTION = ("concurrency", "timeout", "max_retries", "base_url", "api_key_env", "api_key_block", "engine_args")
MODEL_PLANNING = (
    "tokens_per_second",
    "image_tokens",
    "price_input_per_mtok",
    "price_output_per_mtok",
)  # the bill's only
SHOWN = 3  # differences named in the one-line error


def _ids(value: object) -> object:
    """Context lists compared by id; embedded image structs compared by path (sha-named)."""
    if isinstance(value, list):
        return [_ids(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"bytes", "path"}:
            return str(value["path"]).split(".")[0]
        return value.get("context_id") or {k: _ids(v) for k, v in value.items()}
    return value


def comparable(row: dict) -> dict:
    """A release row as two versions compare it: contexts by id, images by sha256."""
    return {k: _ids(v) for k, v in row.items()}


def _signature(table: pa.Table | SpilledTable) -> list[dict]:
    rows = [comparable(row) for batch in table_batches(table) for row in batch.to_pylist()]
    return sorted(rows, key=lambda r: str(r.get("sample_id") or r.get("doc_id")))


def data_differences(existing: Release, draft: ReleaseDraft) -> list[str]:
    """Which configs of ``draft`` hold other rows than ``existing`` (empty: the same data)."""
    if sorted(existing.configs) != sorted(draft.tables):
        return [f"data configs {sorted(existing.configs)} -> {sorted(draft.tables)}"]
    out = []
    for name, table in draft.tables.items():
        old = existing.table(name)
        if old.num_rows != table.num_rows:
            out.append(f"data {name}: {old.num_rows} -> {counted(table.num_rows, 'row')}")
        elif _signature(old) != _signature(table):
            out.append(f"data {name}: other rows")
    return out


def input_differences(old: dict[str, Any] | None, new: dict[str, Any]) -> list[str]:
    """``key: old -> new`` for inputs whose content changed; nothing when ``old`` was not recorded."""
    if old is None:
        return []
    return [
        f"input {key}: content {str(old.get(key))[:12]} -> {str(new.get(key))[:12]}"
        for key in sorted(old.keys() | new.keys())
        if old.get(key) != new.get(key)
    ]


def identity(benchmark: str, config: dict[str, Any], models: list[dict[str, Any]]) -> dict[str, Any]:
    """What decides a release's content: the benchmark's section (but its version and shard size), the judge,
    and the spec of every model by role (but how it is served and what the plan prices it at)."""
    specs = config.get("models") or {}
    return {
        benchmark: {k: v for k, v in (config.get(benchmark) or {}).items() if k not in SECTION_EXECUTION},
        "judge": config.get("judge"),
        "models": {
            f"{m['role']}:{m['name']}": {
                k: v for k, v in (specs.get(m["name"]) or m).items() if k not in MODEL_EXECUTION + MODEL_PLANNING
            }
            for m in models
        },
    }


def _fill_absent(recorded: Any, current: Any) -> Any:
    """``recorded`` with the keys only ``current`` has added from it, at every depth."""
    if not isinstance(recorded, dict) or not isinstance(current, dict):
        return recorded
    return {
        **{k: v for k, v in current.items() if k not in recorded},
        **{k: _fill_absent(v, current.get(k)) for k, v in recorded.items()},
    }


def recorded_config(release: Release) -> dict[str, Any]:
    """The configuration a release recorded, with every setting added to mmcurate since then at
    its default: a setting is added with a default that keeps what runs did before it existed,
    so a release written then was made as that default makes it, and a rerun of its config under
    a newer mmcurate is recognised (a run that sets it otherwise is refused; a default that
    changed the data would be caught when the run publishes, by its data). A recorded config
    today's settings cannot read is compared as recorded."""
    config = release.manifest.config
    try:
        current = Settings.from_resolved(config, release.path).resolved()
    except MmcurateError:
        return config
    return _fill_absent(config, current)


def release_identity(release: Release) -> dict[str, Any]:
    return identity(
        release.benchmark,
        portable(recorded_config(release), release.path.resolve()),
        [model.recorded() for model in release.manifest.models],
    )


def settings_identity(settings: Settings, benchmark: str, target: Path) -> dict[str, Any]:
    """The identity a run of ``settings`` would give the release at ``target``."""
    return identity(
        benchmark,
        portable(settings.resolved(), target.resolve()),
        [{"role": role, "name": name} for role, name in settings.roles(benchmark)],
    )


def _flat(value: Any, at: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        return {key: item for k, v in value.items() for key, item in _flat(v, f"{at}.{k}" if at else str(k)).items()}
    return {at: value}


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """``key: old -> new`` for every leaf that differs between two identities."""
    a, b = _flat(old), _flat(new)
    missing = object()

    def show(value: Any) -> str:
        if value is missing:
            return "(absent)"
        if isinstance(value, list) and len(value) > SHOWN:
            return f"[{listed((json.dumps(v, sort_keys=True) for v in value), SHOWN)}]"
        return json.dumps(value, sort_keys=True)

    return [
        f"{key}: {show(a.get(key, missing))} -> {show(b.get(key, missing))}"
        for key in sorted(a.keys() | b.keys())
        if a.get(key, missing) != b.get(key, missing)
    ]


NEW_VERSION = "publish under a new version (--version)"  # what `run` and `recurate` offer


def refusal(benchmark: str, version: str, diffs: list[str], remedy: str = NEW_VERSION) -> ReleaseExists:
    """One line naming the first differences and what to do (``remedy``, in the command's own options)."""
    return ReleaseExists(
        f"{benchmark} {version} exists and this run differs from it: {listed(diffs, SHOWN, '; ')}; {remedy}"
    )


def draft_differences(existing: Release, draft: ReleaseDraft) -> list[str]:
    """Everything that makes ``draft`` another release than ``existing`` (empty: a rerun)."""
    old = release_identity(existing)
    new = identity(draft.benchmark, portable(draft.config, existing.path.resolve()), draft.models)
    diffs = data_differences(existing, draft) + differences(old, new)
    diffs += input_differences(existing.manifest.inputs, input_digests(draft.benchmark, draft.config, draft.models))
    recorded = [entry.recorded() for entry in existing.manifest.source_files]
    if source_digests(recorded) != source_digests(source_file_entries(draft.source_files)):
        diffs.append(f"source files: their content differs from the {len(recorded)} the release recorded")
    return diffs


def published_rerun(draft: ReleaseDraft, releases_root: Path, folder: Path | None = None) -> Path | None:
    """The release already published as ``draft`` when the draft is a rerun of it (same data,
    configuration and models): publish nothing, return it. None when the version is free;
    refused, naming the difference, when it holds another release. ``folder``: where the
    benchmark's versions are, when not ``releases_root/<benchmark>`` (``writer.write_release``)."""
    existing = (folder if folder is not None else releases_root / draft.benchmark) / draft.version
    if not (existing / MANIFEST).is_file():
        return None
    diffs = draft_differences(open_release(existing), draft)
    if diffs:
        raise refusal(draft.benchmark, draft.version, diffs)
    return existing


def refuse_changed_version(
    settings: Settings, benchmark: str, version: str, remedy: str = NEW_VERSION, folder: Path | None = None
) -> None:
    """Before a run: refuse when ``version`` is published with another configuration, models or
    model and configuration inputs (the sources' content is compared when the run publishes);
    ``folder``: where the benchmark's versions are, when not ``releases_root/<benchmark>``."""
    target = (folder if folder is not None else settings.releases_root / benchmark) / version
    if (target / MANIFEST).is_file():
        existing = open_release(target)
        roles = [{"role": role, "name": name} for role, name in settings.roles(benchmark)]
        diffs = differences(release_identity(existing), settings_identity(settings, benchmark, target))
        diffs += input_differences(existing.manifest.inputs, input_digests(benchmark, settings.resolved(), roles))
        if diffs:
            raise refusal(benchmark, version, diffs, remedy)
