"""POPE probes, balanced: every (dataset, split) holds as many "yes" as "no" (POPE pairs each
positive with a negative, so each of its files is exactly half and half; its yes ratio is read
against 0.5 per dataset and split, as POPE reports them).

A published file whose records were quarantined (a missing image, a malformed line) can
come out unbalanced; then the surplus of the larger label in that (dataset, split) is dropped, the
probes chosen by a seeded order (sha256 of the seed and the sample id), each with a ledger
reason. Nothing else is dropped: a balanced split passes untouched (``pope.balance.v1``).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass

import pyarrow as pa

from mmcurate.core.ledger import Decision
from mmcurate.core.schema import with_meta
from mmcurate.core.stages import Stage, StageContext, StageResult

STAGE = "balance"
CHECK = "pope.balance.v1"
SURPLUS = "surplus probe: its split has more of this label than of the other"


def _order(seed: int, sample_id: str) -> str:
    return hashlib.sha256(f"{seed}\x1f{sample_id}".encode()).hexdigest()


@dataclass
class BalanceProbes(Stage):
    seed: int = 0
    name = STAGE
    shardable = False  # a balance is over a whole split

    def run(self, samples: pa.Table, ctx: StageContext) -> StageResult:
        rows = samples.to_pylist()
        by: dict[tuple[str, str, str], list[str]] = defaultdict(list)
        for row, meta in with_meta(samples):
            by[(meta["dataset"], meta["split"], row["answers"][0])].append(row["sample_id"])
        dropped: set[str] = set()
        for dataset, split in sorted({(dataset, split) for dataset, split, _ in by}):
            yes, no = by[(dataset, split, "yes")], by[(dataset, split, "no")]
            larger = yes if len(yes) > len(no) else no
            surplus = abs(len(yes) - len(no))
            dropped |= set(sorted(larger, key=lambda sid: _order(self.seed, sid))[:surplus])
        decisions = [
            Decision(
                row["sample_id"],
                STAGE,
                CHECK,
                "drop" if row["sample_id"] in dropped else "keep",
                detail={"reason": SURPLUS} if row["sample_id"] in dropped else {},
            )
            for row in rows
        ]
        keep = pa.array([row["sample_id"] not in dropped for row in rows], type=pa.bool_())
        return StageResult(
            stage=STAGE,
            kept=samples.filter(keep),
            decisions=decisions,
            run_id=ctx.run_id,
            counts={"input": len(rows), "kept": len(rows) - len(dropped), "dropped": len(dropped)},
        )
