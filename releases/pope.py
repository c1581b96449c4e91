"""A POPE curation as a release draft: the probes, one config ``probes`` (split ``test``).

A row per probe: ``split`` (POPE's random / popular / adversarial negative sampling),
``dataset``, ``question_id`` (POPE's numbering within the split), ``question``, ``label``
(yes / no), ``object`` (the probed object, null for another wording), the ``image``, and
``origin``: ``published`` (read from POPE's files) or ``built`` (made here from object
annotations by POPE's rules). Statistics: per split and label, per source, and the
balancing. Its Great Expectations suite is ``releases.pope_checks``.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping

import pyarrow as pa

from mmcurate.core.config import Settings
from mmcurate.core.stages import StageResult
from mmcurate.sources.ingest import IngestResult
from mmcurate.sources.pope import SPLITS

from .draft import ReleaseDraft
from .kind import Distribution, ReleaseKind
from .plots import value_counts
from .pope_checks import pope_checks

PROBES = pa.schema([
    pa.field("sample_id", pa.string(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("source_id", pa.string(), nullable=False),
    pa.field("dataset", pa.string(), nullable=False),
    pa.field("split", pa.string(), nullable=False),
    pa.field("question_id", pa.int64(), nullable=False),
    pa.field("question", pa.string(), nullable=False),
    pa.field("label", pa.string(), nullable=False),
    pa.field("object", pa.string()),
    pa.field("image", pa.string(), nullable=False),
    pa.field("origin", pa.string(), nullable=False),
])


def distributions(tables: Mapping[str, pa.Table]) -> dict[str, Distribution]:
    probes = tables["probes"]
    counts = value_counts(probes.column("split"))
    return {"probes per split": ("split", "probes", {s: counts[s] for s in SPLITS if counts.get(s)})}


KIND = ReleaseKind(
    benchmark="pope",
    pretty="POPE",
    description=(
        "POPE probes object hallucination with yes/no questions, 'Is there a <object> in the image?', half about "
        "objects in the image and half about objects that are not, chosen at random, among the most frequent "
        "objects (popular) or among those that most often appear with the image's objects (adversarial). Kestrel "
        "reports its self-refinement on these three splits."),
    configs=("probes",),
    checks=pope_checks,
    distributions=distributions,
    harness="mmcurate.evaluation.pope_harness:harness",
)


def probe_rows(samples: pa.Table) -> pa.Table:
    rows = []
    for row in samples.to_pylist():
        meta = json.loads(row["meta"])
        rows.append({"sample_id": row["sample_id"], "source": row["source"], "source_id": row["source_id"],
                     "dataset": meta["dataset"], "split": meta["split"], "question_id": meta["question_id"],
                     "question": row["question"], "label": row["answers"][0], "object": meta.get("object"),
                     "image": row["images"][0], "origin": meta["origin"]})
    return pa.Table.from_pylist(rows, schema=PROBES)


def pope_draft(settings: Settings, version: str, run_id: str, ingested: list[IngestResult], samples: pa.Table,
               quarantine: pa.Table, balanced: StageResult) -> ReleaseDraft:
    probes = probe_rows(balanced.kept)
    rows = probes.to_pylist()
    counts = Counter((r["split"], r["label"]) for r in rows)
    per_split = [{"split": s, "probes": counts[(s, "yes")] + counts[(s, "no")], "yes": counts[(s, "yes")],
                  "no": counts[(s, "no")], "images": len({r["image"] for r in rows if r["split"] == s})}
                 for s in SPLITS if counts[(s, "yes")] + counts[(s, "no")]]
    per_source = {r.source: {"ingested": r.samples, "quarantined": r.quarantined, "skipped": r.skipped}
                  for r in ingested}
    for row in rows:
        per_source[row["source"]]["released"] = per_source[row["source"]].get("released", 0) + 1
    origins = sorted({r["origin"] for r in rows})
    return ReleaseDraft(
        kind=KIND, version=version, parent=None, tables={"probes": probes},
        ledger=balanced.decision_log(),
        quarantine=quarantine, config=settings.resolved(), models=[], judge={"name": "none"},
        components={"probes": "+".join(origins)},
        source_files=sorted({f for r in ingested for f in r.source_files}),
        counts={"per_stage": {balanced.stage: balanced.counts}, "per_source": per_source,
                "ingested": samples.num_rows, "run_id": run_id},
        statistics={"splits": per_split,
                    "balance": [{"stage": balanced.stage, **balanced.counts}]},
        seed=settings.pope.seed,
        notes=[f"probes {'built from object annotations by POPE rules' if o == 'built' else 'read from POPE files'} "
               f"({o})" for o in origins],
    )
