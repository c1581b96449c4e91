"""The one shape of a curation stage, for every benchmark.

A stage is a small object that holds its settings (a gating config, a retriever spec, ...)
and has one method, ``run(samples, ctx) -> StageResult``: it keeps a subset of the sample
table (possibly annotated) and says why in ledger decisions. ``ctx`` carries what the run
provides: the resolved settings, the run id, the image store and the opened models. The
stage never learns which executor runs it; ``tasks.stages.run_stage`` runs any stage on
shards of the table on the configured task runner and merges the shard results with
``merge_results``. A flow is the list of its stages, so adding a stage is one module plus
one line in a flow (the pattern of datatrove's pipeline steps).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa

from .errors import MmcurateError
from .images import ImageStore
from .ledger import Decision, Ledger, ledger_table
from .tables import SpilledTable

if TYPE_CHECKING:  # the model layer sits above core; annotations only
    from mmcurate.core.config import Settings
    from mmcurate.judging.session import Models
    from mmcurate.judging.simpleqa import Judge
    from mmcurate.models.client import ModelPool


@dataclass
class StageContext:
    """What a run hands every stage."""

    settings: Settings
    run_id: str
    store: ImageStore
    models: Models | None = None  # None: the stage runs without the model layer

    @property
    def pool(self) -> ModelPool:
        if self.models is None:
            raise MmcurateError("this stage calls models, but the run opened none")
        return self.models.pool

    @property
    def judge(self) -> Judge:
        if self.models is None:
            raise MmcurateError("this stage judges answers, but the run opened no judge")
        return self.models.judge

    @property
    def index_dir(self) -> Path:
        """Where vector indexes are cached between runs."""
        return self.settings.index_dir

    @property
    def ledger_dir(self) -> Path:
        """Where the run's decisions are spilled as Parquet parts (``StageResult.ledger_parts``)."""
        return self.settings.workdir / "runs" / self.run_id / "ledger"


class Stage(ABC):
    """One curation step: ``run(samples, ctx)`` returns the kept rows and the decisions."""

    name: ClassVar[str]  # the ledger's ``stage`` value, e.g. "parametric"
    shardable: ClassVar[bool] = True  # False: the stage runs as one task on the table it is given

    @abstractmethod
    def run(self, samples: pa.Table, ctx: StageContext) -> StageResult: ...

    @property
    def pool_wide(self) -> bool:
        """True when the stage must see every sample of the run at once (a streamed run then
        hands it the whole table, or the columns ``reads`` names); False when its result on a
        shard of the run's samples is its result on the whole run, restricted to that shard."""
        return not self.shardable

    def reads(self, schema: pa.Schema) -> list[str] | None:
        """The columns a pool-wide stage reads (it keeps rows, never changes them); None: every column."""
        return None

    def merge(self, results: list[StageResult]) -> StageResult:
        """The stage's result over all its shards (``merge_results``; a stage whose ``extra``
        differs between shards merges it here)."""
        return merge_results(results)


@dataclass(kw_only=True)
class StageResult:
    """The rows a stage keeps and why, as ledger decisions, plus what explains the run."""

    stage: str
    kept: pa.Table | SpilledTable  # subset of the input samples, possibly annotated or with pruned negatives
    decisions: list[Decision] = field(default_factory=list)
    run_id: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    skipped: bool = False  # the stage did not filter (e.g. no encoder configured); ``reason`` says why
    reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # JSON-able facts the same on every shard
    requests: int = 0  # requests actually issued (cache hits included)
    calls: list[dict[str, Any]] = field(
        default_factory=list
    )  # CallCounter rows: {stage, model, calls, cache_hits, ...}
    components: dict[str, str] = field(default_factory=dict)  # named in the manifest (judge, encoders)
    ledger_parts: list[Path] = field(default_factory=list)  # decisions already written to Parquet, before ``decisions``

    def decision_log(self) -> Ledger:
        """Every decision of the stage, streamed: the spilled parts, then those in memory."""
        return Ledger([*self.ledger_parts, *([ledger_table(self.decisions, self.run_id)] if self.decisions else [])])

    def ledger(self) -> pa.Table:
        """The same decisions as one table (for small results and tests)."""
        return self.decision_log().table()

    def spill(self, path: Path) -> StageResult:
        """The same result with its in-memory decisions written to ``path`` (Parquet)."""
        Ledger([ledger_table(self.decisions, self.run_id)]).write(path)
        return replace(self, decisions=[], ledger_parts=[*self.ledger_parts, path])

    def verdicts(self, check: str) -> dict[str, str]:
        """sample_id -> verdict of the in-memory rows with this check and no model (sample-level)."""
        return {d.sample_id: d.verdict for d in self.decisions if d.check == check and d.model is None}


def shards(table: pa.Table, size: int) -> list[pa.Table]:
    """Consecutive slices of at most ``size`` rows (at least one, possibly empty)."""
    return [table.slice(start, size) for start in range(0, table.num_rows, size)] or [table]


def _sum_calls(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        into = merged.setdefault((row["stage"], row["model"]), {"stage": row["stage"], "model": row["model"]})
        for name, value in row.items():
            if name not in ("stage", "model"):
                into[name] = into.get(name, 0) + value
    return [merged[key] for key in sorted(merged)]


def merge_results(results: list[StageResult]) -> StageResult:
    """One stage's result over all its shards, as if it had run on the whole table."""
    if not results:
        raise ValueError("merge_results needs at least one shard result")
    first = results[0]
    counts: dict[str, int] = {}
    for result in results:
        for key, value in result.counts.items():
            counts[key] = counts.get(key, 0) + value
    return StageResult(
        stage=first.stage,
        kept=pa.concat_tables([r.kept for r in results]),
        decisions=[d for r in results for d in r.decisions],
        run_id=first.run_id,
        counts=counts,
        skipped=first.skipped,
        reason=first.reason,
        extra=first.extra,
        requests=sum(r.requests for r in results),
        calls=_sum_calls([row for r in results for row in r.calls]),
        components=first.components,
        ledger_parts=[p for r in results for p in r.ledger_parts],
    )
