"""POPE's three splits as harness tasks (seed 000 section 4.1; POPE's ``evaluate.py``): the
probe's image and question as ``pope.plain_requests`` sends them, the reply read by POPE's
rule (``pope.read_answer``) and accuracy, precision, recall, F1 and yes ratio computed by
``pope.metrics``, "yes" the positive class."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mmcurate.sources.pope import SPLITS

from .harness import Doc, Harness, HarnessTask, Records
from .pope import PLAIN_MAX_TOKENS, metrics, plain_requests, read_answer

METRICS = ("accuracy", "precision", "recall", "f1", "yes_ratio")
GENERATION = {"max_new_tokens": PLAIN_MAX_TOKENS, "temperature": 0.0, "do_sample": False}


def _record(doc: Doc, reply: str) -> dict[str, Any]:
    return {"sample_id": doc["sample_id"], "split": doc["split"], "label": doc["label"], "reply": reply,
            "answer": read_answer(reply)}


def measure(name: str) -> Any:
    """The aggregation of one POPE metric over a task's records (all of one split)."""
    def aggregate(records: Records) -> float | None:
        return next(row[name] for row in metrics(records) if row["split"] == "all")
    aggregate.__name__ = name
    return aggregate


def harness(manifest: Mapping[str, Any]) -> Harness:
    tasks = tuple(
        HarnessTask(name=split, config="probes", request=lambda doc: plain_requests([doc])[0].messages,
                    target=lambda doc: doc["label"], record=_record, metrics={m: measure(m) for m in METRICS},
                    keep=lambda doc, split=split: doc["split"] == split, generation=GENERATION,
                    description=f"POPE {split} split")
        for split in SPLITS)
    return Harness(tasks, note=(
        "POPE's random, popular and adversarial splits, the plain system (the image and the question); replies "
        "read by POPE's rule (no when the first sentence holds no/not), metrics as in POPE's evaluate.py, "
        "fractions in [0, 1]. Kestrel's loop needs a grounding agent and several calls per probe: run it with "
        "`mmcurate evaluate --system kestrel`."))
