"""DeflectionBench's Great Expectations suite: every sample with its question, answers, decodable
images, gold contexts never among its negatives, no duplicate context, the seeded shuffle,
at least K_min negatives, and the configured source mix."""

from __future__ import annotations

import great_expectations.expectations as gxe

from .. import quality_frames as qf
from ..kind import FrameCheck, WrittenRelease
from ..validation import sample_rules


def deflection_checks(release: WrittenRelease) -> tuple[list[FrameCheck], list[str]]:
    manifest = release.manifest
    frame = qf.deflection_frame(release.batches("test"))
    notes: list[str] = []
    rules = [
        *sample_rules(qf.DEFLECTION_COLUMNS, qf.DEFLECTION_DERIVED, ("question_chars", "n_answers")),
        gxe.ExpectColumnValuesToBeInSet(column="gold_in_negatives", value_set=[False]),
        gxe.ExpectColumnValuesToBeBetween(column="n_duplicate_contexts", min_value=0, max_value=0),
        gxe.ExpectColumnValuesToNotBeNull(column="shuffle_seed"),
        gxe.ExpectColumnValuesToBeInSet(column="shuffle_seed", value_set=[manifest.seed]),
    ]
    if manifest.k_min is not None:
        rules.append(gxe.ExpectColumnValuesToBeBetween(column="n_negatives", min_value=int(manifest.k_min)))
    else:
        notes.append("k_min not set: minimum-negatives check skipped")
    checks = [FrameCheck("test", frame, "sample_id", rules)]
    bounds = (manifest.config.get("deflectionbench") or {}).get("source_mix") or {}
    if bounds:
        mix = qf.source_mix_frame(frame["source"].tolist(), {k: tuple(v) for k, v in bounds.items()})
        checks.append(
            FrameCheck(
                "source_mix",
                mix,
                "source",
                [
                    gxe.ExpectColumnValuesToBeInSet(column="in_bounds", value_set=[True]),
                ],
            )
        )
    else:
        notes.append("deflectionbench.source_mix not configured: source-mix check skipped")
    return checks, notes
