"""Which QA pairs of a RefLVQA release an evaluation reads (seed 004, section 3.3: "we collect
1,369 QA instances containing 3,382 human-verified fact-checkable sentences ... We utilize this
human-annotated subset to evaluate the model's performance in 5.1 and 5.2").

A release's verification labels come back from people through ``mmcurate annotate import``
(``review/reflvqa/citations.py``), which writes ``human_verified.parquet`` beside, never into, the
immutable release; ``evaluation.reflvqa.verified_labels`` names that file (or the folder
holding it). ``subset``:

- ``verified`` (the default, the paper's): the pairs with at least one human-verified
  sentence, completeness graded over those sentences only (004 section 4.2: "the
  fact-checkable sentences ... as annotated in 3.2 and 3.3"). Without labels every pair is
  read and the table's notes say so; asking for it explicitly (``--subset verified``) without
  labels is refused before any flow starts.
- ``all``: every pair of the release, completeness over every fact-checkable, supported sentence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from mmcurate.benchmarks import register_part
from mmcurate.benchmarks.reflvqa import RefLVQAEvalConfig
from mmcurate.core.config import Settings
from mmcurate.core.errors import MmcurateError
from mmcurate.core.ids import sha256_file
from mmcurate.core.plural import counted

VERIFIED, ALL = "verified", "all"
SUBSETS = (VERIFIED, ALL)
LABELS_FILE = "human_verified.parquet"
VERIFIED_SENTENCES = "verified_sentences"  # added to a QA row of the verified subset: its verified sentence indices


def labels_path(path: Path) -> Path:
    """The labels file a configured path names: the file, or ``human_verified.parquet`` in the folder."""
    return path / LABELS_FILE if path.is_dir() else path


def read_verified(path: Path) -> dict[str, set[int]]:
    """sample_id -> the indices of its human-verified sentences (``review.reflvqa.citations.HUMAN_VERIFIED`` rows)."""
    file = labels_path(path)
    try:
        rows = pq.read_table(file, columns=["sample_id", "sentence_index", "human_verified"]).to_pylist()
    except (OSError, ValueError, KeyError) as exc:
        raise MmcurateError(
            f"evaluation.reflvqa.verified_labels: {file} is not an imported labels file "
            f"(mmcurate annotate import writes {LABELS_FILE}): {exc}"
        ) from None
    verified: dict[str, set[int]] = {}
    for row in rows:
        if row["human_verified"]:
            verified.setdefault(row["sample_id"], set()).add(int(row["sentence_index"]))
    return verified


def choose_pairs(qa: Sequence[Mapping[str, Any]], labels: Path | None, subset: str) -> tuple[list[dict[str, Any]], str]:
    """The QA rows an evaluation reads and the note saying which and how many."""
    if subset not in SUBSETS:
        raise MmcurateError(f"unknown subset {subset!r}; known: {', '.join(SUBSETS)}")
    if subset == ALL:
        return [dict(r) for r in qa], f"subset: all ({len(qa)} QA pairs, every pair of the release)"
    if labels is None:
        return [dict(r) for r in qa], (
            f"subset: all ({len(qa)} QA pairs): the release has no imported verification "
            "labels (evaluation.reflvqa.verified_labels unset), so the paper's "
            "human-verified subset cannot be read"
        )
    verified = read_verified(labels)
    known = {r["sample_id"] for r in qa}
    foreign = sorted(set(verified) - known)
    if foreign:
        raise MmcurateError(
            f"evaluation.reflvqa.verified_labels: {labels_path(labels)} labels "
            f"{counted(len(foreign), 'QA pair')} this release does not hold (first: {foreign[0]}); "
            "were they imported for another release?"
        )
    rows = [{**r, VERIFIED_SENTENCES: sorted(verified[r["sample_id"]])} for r in qa if r["sample_id"] in verified]
    sentences = sum(len(r[VERIFIED_SENTENCES]) for r in rows)
    return rows, (
        f"subset: verified ({len(rows)} of {counted(len(qa), 'QA pair')}, with "
        f"{counted(sentences, 'human-verified sentence')}, "
        f"labels {labels_path(labels)}; completeness over those sentences)"
    )


def population(labels: Path | None, subset: str) -> str:
    """What a run of ``subset`` reads, for its evaluation folder (``evaluation.runs.updating``):
    ``all``, or ``verified`` with the content hash of the labels file that chose the pairs."""
    if subset == ALL or labels is None:
        return ALL
    return f"{VERIFIED} (labels sha256 {sha256_file(labels_path(labels))[:12]})"


@register_part("reflvqa", "evaluation_refuse")
def refuse_unrunnable(settings: Settings, model: str, options: Mapping[str, Any]) -> None:
    """``--subset verified`` asked for with no labels configured: one line, before any flow starts."""
    cfg = RefLVQAEvalConfig.of(settings)
    if options.get("subset") == VERIFIED and cfg.verified_labels is None:
        raise MmcurateError(
            "--subset verified: no verification labels configured; import them with mmcurate "
            "annotate import and name the human_verified.parquet it writes in "
            "evaluation.reflvqa.verified_labels, or give --subset all"
        )
    if cfg.verified_labels is not None and not labels_path(cfg.verified_labels).is_file():
        raise MmcurateError(f"evaluation.reflvqa.verified_labels: {labels_path(cfg.verified_labels)} does not exist")
