"""POPE's Great Expectations suite: every probe a question with a yes/no label, a known split
(POPE's, or an MME subtask) and a decodable image, unique ids, and every (dataset, split)
balanced (as many yes as no)."""

from __future__ import annotations

import great_expectations.expectations as gxe
import pandas as pd
import pyarrow as pa

from mmcurate.sources.mme import SUBTASKS
from mmcurate.sources.pope import BUILT, LABELS, PUBLISHED, SPLITS

from ..kind import FrameCheck, WrittenRelease
from ..quality_frames import image_decodes
from ..validation import sample_rules

DERIVED = ["question_chars", "label_chars", "images_decode"]


def probe_frame(table: pa.Table) -> pd.DataFrame:
    frame = table.to_pandas()
    rows = table.to_pylist()
    frame["question_chars"] = [len((r["question"] or "").strip()) for r in rows]
    frame["label_chars"] = [len((r["label"] or "").strip()) for r in rows]
    frame["images_decode"] = [image_decodes(r["image"]) for r in rows]
    return frame.drop(columns=["image"])


def balance_frame(table: pa.Table) -> pd.DataFrame:
    """One row per (dataset, split): its yes and no counts and whether they are equal."""
    keys = [f"{d}/{s}" for d, s in zip(table.column("dataset").to_pylist(), table.column("split").to_pylist())]
    labels = table.column("label").to_pylist()
    rows = []
    for key in sorted(set(keys)):
        yes = sum(k == key and lab == "yes" for k, lab in zip(keys, labels))
        no = sum(k == key and lab == "no" for k, lab in zip(keys, labels))
        rows.append({"split": key, "yes": yes, "no": no, "balanced": yes == no})
    return pd.DataFrame(rows, columns=["split", "yes", "no", "balanced"])


def pope_checks(release: WrittenRelease) -> tuple[list[FrameCheck], list[str]]:
    probes = release.table("probes")
    columns = [c for c in probes.column_names if c != "image"]
    return [
        FrameCheck(
            "probes",
            probe_frame(probes),
            "sample_id",
            [
                *sample_rules(columns, DERIVED, ("question_chars", "label_chars")),
                gxe.ExpectColumnValuesToBeInSet(column="label", value_set=list(LABELS)),
                gxe.ExpectColumnValuesToBeInSet(column="split", value_set=[*SPLITS, *SUBTASKS]),
                gxe.ExpectColumnValuesToBeInSet(column="origin", value_set=[PUBLISHED, BUILT]),
                gxe.ExpectColumnValuesToBeUnique(column="source_id"),
            ],
        ),
        FrameCheck(
            "balance",
            balance_frame(probes),
            "split",
            [
                gxe.ExpectColumnValuesToBeInSet(column="balanced", value_set=[True]),
            ],
        ),
    ], []
