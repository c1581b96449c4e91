"""POPE's probes as harness tasks, one per (dataset, split) as POPE reports them (seed 000
section 4.1; POPE's ``evaluate.py``): the probe's image and question as ``pope.plain_requests``
sends them, the reply read by its benchmark's rule (``pope.reader``: POPE's, or MME's for MME's
hallucination subtasks) and the metrics of ``pope.metrics`` ("yes" the positive class:
accuracy, precision, recall, F1, yes ratio) or, for an MME subtask, ``mme.mme_scores``'s
accuracy, accuracy+ and score. The (dataset, split) pairs come from the release
(``values["pairs"]``, the probes table's)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mmcurate.sources.mme import DATASET as MME

from ..harness import Doc, Harness, HarnessTask, Records
from . import mme
from .probes import PLAIN_MAX_TOKENS, metrics, plain_requests, reader

POPE_METRICS = ("accuracy", "precision", "recall", "f1", "yes_ratio")
MME_METRICS = ("accuracy", "accuracy_plus", "score")
GENERATION = {"max_new_tokens": PLAIN_MAX_TOKENS, "temperature": 0.0, "do_sample": False}


def _record(doc: Doc, reply: str) -> dict[str, Any]:
    return {
        "sample_id": doc["sample_id"],
        "dataset": doc["dataset"],
        "split": doc["split"],
        "label": doc["label"],
        "image_file": doc.get("image_file") or doc["sample_id"],
        "reply": reply,
        "answer": reader(doc)(reply),
    }


def pope_measure(name: str) -> Any:
    """One POPE metric over a task's records (all of one dataset and split)."""

    def aggregate(records: Records) -> float | None:
        return next(row[name] for row in metrics(records) if row["dataset"] == "all")

    aggregate.__name__ = name
    return aggregate


def mme_measure(name: str) -> Any:
    """One of MME's numbers (in %, the score up to 200) over a subtask's records."""

    def aggregate(records: Records) -> float | None:
        return mme.mme_scores(records)[0][f"answer_{name}"]

    aggregate.__name__ = name
    return aggregate


def _task(dataset: str, split: str) -> HarnessTask:
    scored = {m: mme_measure(m) for m in MME_METRICS} if dataset == MME else {m: pope_measure(m) for m in POPE_METRICS}
    return HarnessTask(
        name=f"{dataset}_{split}",
        config="probes",
        request=lambda doc: plain_requests([doc])[0].messages,
        target=lambda doc: doc["label"],
        record=_record,
        metrics=scored,
        keep=lambda doc: (doc["dataset"], doc["split"]) == (dataset, split),
        generation=GENERATION,
        description=f"{'MME' if dataset == MME else 'POPE'} {dataset} {split}",
    )


def harness(values: Mapping[str, Any]) -> Harness:
    return Harness(
        tuple(_task(dataset, split) for dataset, split in values.get("pairs") or ()),
        note=(
            "One task per (dataset, split), as POPE reports each dataset's random, popular and adversarial splits "
            "apart; the plain system (the image and the question); replies read by POPE's rule (no when the first "
            "sentence holds no/not; metrics as in POPE's evaluate.py, fractions in [0, 1]) or, for MME's "
            "hallucination subtasks, MME's (accuracy and accuracy+ in %, their sum the subtask's score). Kestrel's "
            "loop needs a grounding agent and several calls per probe: run it with `mmcurate evaluate --system kestrel`."
        ),
    )
