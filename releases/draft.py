"""What a flow hands to the release writer: tables plus everything needed to explain them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from mmcurate.core.ledger import Ledger
from mmcurate.core.tables import SpilledTable

from .kind import ReleaseKind


@dataclass
class ReleaseDraft:
    kind: ReleaseKind  # the benchmark's releases: configs, card text, checks
    version: str  # semantic version "1.0.0"
    parent: dict[str, str] | str | None  # {version, content_id} of the release it re-curates, or None
    tables: dict[str, pa.Table | SpilledTable]  # one table per config of ``kind`` (spilled: read back in parts)
    ledger: Ledger  # every decision of the run, streamed (a LEDGER table is wrapped)
    quarantine: pa.Table  # core.schema.QUARANTINE
    config: dict  # fully resolved config
    models: list[dict]  # each {"role": ..., **ModelSpec.identity()}
    judge: dict  # {"name": ...}
    components: Mapping[str, str | None]  # stand-ins stay visible, e.g. {"entailment": "lexical-overlap-v1"}
    source_files: list  # raw input file paths (hashed into the manifest) or inherited entries
    counts: dict  # {"per_stage": {...}, "per_source": {...}}
    statistics: dict[str, list[dict]]  # named tables: per_source, global, funnel, calls, convergence, judge_errors
    seed: int
    k_min: int | None = None
    removed: list[dict] = field(default_factory=list)  # vs parent: {sample_id, reason, removed_in}
    notes: list[str] = field(default_factory=list)  # limitations, skipped stages
    incomplete: dict | None = None  # what failed, when an incomplete release was allowed (completeness.py)
    changelog: str | None = None  # CHANGELOG.md of a re-curation (releases.changelog), sealed with the release
    indexes: list[dict] = field(default_factory=list)  # vector indexes searched: kind, params, recall, build time

    def __post_init__(self) -> None:
        if isinstance(self.ledger, pa.Table):
            self.ledger = Ledger([self.ledger])

    @property
    def benchmark(self) -> str:
        return self.kind.benchmark

    @property
    def parent_version(self) -> str | None:
        return self.parent.get("version") if isinstance(self.parent, dict) else self.parent
