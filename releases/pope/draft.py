"""A POPE curation as a release draft: the probes, one config ``probes`` (split ``test``).

A row per probe: ``split`` (POPE's random / popular / adversarial negative sampling),
``dataset`` (the set the probe came from: ``coco``, ``aokvqa``, ``gqa`` for POPE's files),
``question_id`` (POPE's numbering within the split), ``question``, ``label`` (yes / no),
``object`` (the probed object, null for another wording), the ``image`` (content hash),
``image_file`` (the image's published file name, e.g. COCO val2014's, so a probe can be
matched back to its source and the real images brought later with ``--images``), and
``origin``: ``published`` (read from POPE's files) or ``built`` (made here from object
annotations by POPE's rules). Statistics: per (dataset, split) and label, as POPE reports each
dataset's splits apart; per source; the balancing. Its Great Expectations suite is
``releases.pope.checks``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from mmcurate.benchmarks import register_part
from mmcurate.benchmarks.pope import PopeConfig
from mmcurate.core.config import Settings
from mmcurate.core.schema import with_meta
from mmcurate.core.stages import StageResult
from mmcurate.evaluation.pope.harness import harness as lmms_harness
from mmcurate.sources.ingest import IngestResult
from mmcurate.sources.mme import PROBE_SPLITS
from mmcurate.sources.pope import dataset_splits

from ..draft import ReleaseDraft
from ..kind import Distribution, ReleaseKind
from .checks import pope_checks

PROBES = pa.schema(
    [
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
        pa.field("image_file", pa.string(), nullable=False),
        pa.field("origin", pa.string(), nullable=False),
    ]
)


def distributions(tables: Mapping[str, pa.Table]) -> dict[str, Distribution]:
    rows = tables["probes"].select(["dataset", "split"]).to_pylist()
    counts = Counter((r["dataset"], r["split"]) for r in rows)
    return {
        "probes per dataset and split": (
            "dataset/split",
            "probes",
            {f"{d}/{s}": counts[(d, s)] for d, s in dataset_splits(rows, PROBE_SPLITS)},
        )
    }


KIND = ReleaseKind(
    benchmark="pope",
    pretty="POPE",
    description=(
        "POPE probes object hallucination with yes/no questions, 'Is there a <object> in the image?', half about "
        "objects in the image and half about objects that are not, chosen at random, among the most frequent "
        "objects (popular) or among those that most often appear with the image's objects (adversarial), per "
        "dataset (COCO, A-OKVQA, GQA in POPE's files). MME's hallucination subtasks (existence, count, position, "
        "color: two yes/no questions per image) may stand beside them as dataset 'mme'. Kestrel reports its "
        "self-refinement on both."
    ),
    configs=("probes",),
    checks=pope_checks,
    distributions=distributions,
    harness=lmms_harness,
)
register_part("pope", "release")(KIND)


def probe_rows(samples: pa.Table) -> pa.Table:
    rows = [
        {
            "sample_id": row["sample_id"],
            "source": row["source"],
            "source_id": row["source_id"],
            "dataset": meta["dataset"],
            "split": meta["split"],
            "question_id": meta["question_id"],
            "question": row["question"],
            "label": row["answers"][0],
            "object": meta.get("object"),
            "image": row["images"][0],
            "image_file": meta["image"],
            "origin": meta["origin"],
        }
        for row, meta in with_meta(samples)
    ]
    return pa.Table.from_pylist(rows, schema=PROBES)


def pope_draft(
    settings: Settings,
    version: str,
    run_id: str,
    ingested: list[IngestResult],
    samples: pa.Table,
    quarantine: pa.Table,
    balanced: StageResult,
) -> ReleaseDraft:
    probes = probe_rows(balanced.kept)
    rows = probes.to_pylist()
    counts = Counter((r["dataset"], r["split"], r["label"]) for r in rows)
    per_split = [
        {
            "dataset": d,
            "split": s,
            "probes": counts[(d, s, "yes")] + counts[(d, s, "no")],
            "yes": counts[(d, s, "yes")],
            "no": counts[(d, s, "no")],
            "images": len({r["image"] for r in rows if (r["dataset"], r["split"]) == (d, s)}),
        }
        for d, s in dataset_splits(rows, PROBE_SPLITS)
    ]
    per_source: dict[str, dict[str, Any]] = {
        r.source: {"ingested": r.samples, "quarantined": r.quarantined, "skipped": r.skipped} for r in ingested
    }
    for row in rows:
        per_source[row["source"]]["released"] = per_source[row["source"]].get("released", 0) + 1
    origins = sorted({r["origin"] for r in rows})
    return ReleaseDraft(
        kind=KIND,
        version=version,
        parent=None,
        tables={"probes": probes},
        ledger=balanced.decision_log(),
        quarantine=quarantine,
        config=settings.resolved(),
        models=[],
        judge={"name": "none"},
        components={"probes": "+".join(origins)},
        source_files=sorted({f for r in ingested for f in r.source_files}),
        counts={
            "per_stage": {balanced.stage: balanced.counts},
            "per_source": per_source,
            "ingested": samples.num_rows,
            "run_id": run_id,
        },
        statistics={"splits": per_split, "balance": [{"stage": balanced.stage, **balanced.counts}]},
        seed=PopeConfig.of(settings).seed,
        notes=[
            f"probes {'built from object annotations by POPE rules' if o == 'built' else 'read from POPE files'} ({o})"
            for o in origins
        ],
    )
