"""ReflectV release tables reduced to one scalar per row and rule, for Great Expectations.

Every rule of the turn-format validator (``annotation.reflectv.turns.RULES``) becomes a
column ``turns_breaking_<rule>``: how many turns of the row's conversation break it, which
the suite expects to be 0. Around them: the conversation's length agrees with its format,
the first turn sees the original image, ``depth`` counts the reflective rounds (turns but the
last), every embedded image decodes, and the dialogues table's scores are in 0..10 with one
per turn and its rendered trajectory has one entry per turn.
"""

from __future__ import annotations

import hashlib
import math
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pyarrow as pa

from mmcurate.annotation.reflectv.formatting import MULTI, SINGLE
from mmcurate.annotation.reflectv.turns import RULES, defect_counts

from ..quality_frames import image_decodes
from .sft import CONVERSATIONS, SFT_DIR, SHAREGPT, read_records, record_defects

TRAJECTORY_DERIVED = [
    "question_chars",
    "n_answers",
    "n_turns",
    "turns_match_format",
    "first_turn_original",
    "depth_is_reflective_rounds",
    "images_decode",
    *(f"turns_breaking_{rule}" for rule in RULES),
]
DIALOGUE_DERIVED = ["n_scores_match_turns", "trajectory_matches_turns", "min_score", "max_score", "images_decode"]


def _digest(image: dict | None) -> str | None:
    return hashlib.sha256(image["bytes"]).hexdigest() if image and image.get("bytes") else None


def trajectory_frame(table: pa.Table) -> pd.DataFrame:
    frame = table.to_pandas()
    rows = table.to_pylist()
    derived: dict[str, list] = {name: [] for name in TRAJECTORY_DERIVED}
    for row in rows:
        turns = row["conversation"] or []
        truths = list(row["answers"] or [])
        counts = defect_counts([t["text"] for t in turns], truths)
        derived["question_chars"].append(len((row["question"] or "").strip()))
        derived["n_answers"].append(sum(1 for a in row["answers"] or [] if a and a.strip()))
        derived["n_turns"].append(len(turns))
        derived["turns_match_format"].append(
            (row["format"] == MULTI and len(turns) >= 2) or (row["format"] == SINGLE and len(turns) == 1)
        )
        derived["first_turn_original"].append(bool(turns) and _digest(turns[0]["image"]) == _digest(row["image"]))
        derived["depth_is_reflective_rounds"].append(row["depth"] == len(turns) - 1)  # Figure 5c
        derived["images_decode"].append(image_decodes(row["image"]) and all(image_decodes(t["image"]) for t in turns))
        for rule in RULES:
            derived[f"turns_breaking_{rule}"].append(counts[rule])
    for name, values in derived.items():
        frame[name] = values
    return frame


def composition_frame(table: pa.Table, rho: float, rule: str) -> pd.DataFrame:
    """One row: the share of multi-turn chains and whether it meets rho under ``rule``
    (``formatting.RHO_RULES``): ``collapse`` keeps no more chains than rho asks for,
    ceil(rho * total) (with fewer chains the share stays below rho: no QA pair is dropped);
    ``collapse_or_drop`` reaches rho (it cannot when there is no chain at all, and then nothing
    was dropped for it)."""
    formats = table.column("format").to_pylist()
    multi = sum(f == MULTI for f in formats)
    share = multi / len(formats) if formats else 0.0
    meets = (
        multi <= math.ceil(Fraction(str(rho)) * len(formats))
        if rule == "collapse"
        else multi == 0 or share >= rho - 1e-9
    )
    return pd.DataFrame(
        [{"rho": rho, "rho_rule": rule, "multi_turn": multi, "total": len(formats), "share": share, "meets_rho": meets}]
    )


def dialogue_frame(table: pa.Table) -> pd.DataFrame:
    frame = table.to_pandas()
    rows = table.to_pylist()
    scores = [[t["score"] for t in row["dialogue"] or []] for row in rows]
    frame["n_scores_match_turns"] = [len(s) == row["student_turns"] and len(s) >= 1 for s, row in zip(scores, rows)]
    frame["trajectory_matches_turns"] = [len(row["trajectory"] or []) == row["student_turns"] for row in rows]
    frame["min_score"] = [min(s) if s else -1 for s in scores]
    frame["max_score"] = [max(s) if s else -1 for s in scores]
    frame["images_decode"] = [
        image_decodes(row["image"]) and all(image_decodes(t["image"]) for t in row["trajectory"] or []) for row in rows
    ]
    return frame


def sft_frame(release: Path, trajectories: pa.Table) -> pd.DataFrame:
    """One row per record of the training export (both layouts joined by id): its defects
    (``sft.record_defects``, empty when none) and whether it is a released trajectory."""
    ids = set(trajectories.column("sample_id").to_pylist())
    folder = release / SFT_DIR
    shared = {r["id"]: r for r in read_records(release, SHAREGPT)}
    rows = []
    for record in read_records(release, CONVERSATIONS):
        other = shared.pop(record["id"], None)
        defects = record_defects(record, folder)
        defects += (
            ["no sharegpt record"] if other is None else [f"sharegpt: {d}" for d in record_defects(other, folder, True)]
        )
        rows.append({"id": record["id"], "defects": "; ".join(defects), "in_release": record["id"] in ids})
    rows += [{"id": sid, "defects": "no conversations record", "in_release": sid in ids} for sid in shared]
    return pd.DataFrame(rows, columns=["id", "defects", "in_release"])
