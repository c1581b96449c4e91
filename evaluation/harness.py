"""A benchmark's evaluation as tasks of an outside harness (lmms-eval), each step one of
mmcurate's own rules.

A ``HarnessTask`` is what one lmms-eval task needs, as plain functions over one document
(a row of the release's Parquet shard, images decoded by ``datasets`` as PIL images):
the messages the model is sent (``doc_to_messages``, the exact request ``mmcurate
evaluate`` builds), the same split into images and text for harness models that take them
apart (``doc_to_visual``, ``doc_to_text``), the target, the per-document record
(``process_results``: the answer read and graded by mmcurate's rule) and one aggregation
per metric, computed by mmcurate's metric function over the records. So an lmms-eval run
and ``mmcurate evaluate`` on the same answers give the same numbers: there is one rule.

``text_only`` drops every image from what the model is sent (a text-only model such as the
embedded SmolLM2); the exported task says so in its metadata.

Messages come from mmcurate's request builders, which name images by sha256; a document's
images are PIL objects, so they are named ``doc-image:<i>`` in the order met and put back.

A request lmms-eval gave up on comes back as a reply starting ``[LMMS_EVAL_REQUEST_FAILED``
(its API models' marker, with the error). Such a reply is never read or graded: its record
says it failed, every rate is computed over the other (``graded``) documents, and every task
reports three more numbers: ``graded``, ``failed_requests`` and ``failed_samples`` (the failed
documents' sample ids). A failed call is the server's trouble, not the model's answer, so it
counts as neither a wrong answer nor an abstention (as ``metrics.compute_metrics`` leaves
failed calls out of DeflectionBench's rates).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Doc = Mapping[str, Any]
Records = list[dict[str, Any]]
PLACEHOLDER = "doc-image:"
FAILED_REPLY = "[LMMS_EVAL_REQUEST_FAILED"  # how lmms-eval's API models answer a request that failed every retry
GRADED, FAILED_REQUESTS, FAILED_SAMPLES = "graded", "failed_requests", "failed_samples"
COUNTS = (GRADED, FAILED_REQUESTS, FAILED_SAMPLES)  # the numbers every task adds to its own metrics
FAILED = "request_failed"  # the record of a failed request: its sample id and the marker reply, nothing graded


@dataclass(frozen=True)
class HarnessTask:
    """One task: its name suffix, the release config (table) it reads and the rules."""

    name: str  # the task's own part of the name: "<group>_<name>"
    config: str  # the release's table (the card's config name), e.g. "test", "probes"
    request: Callable[[Doc], list[dict]]  # mmcurate's request messages (images as sha256 placeholders)
    target: Callable[[Doc], str]
    record: Callable[[Doc, str], dict[str, Any]]  # the answer, read and graded: one per-document record
    metrics: Mapping[str, Callable[[Records], float | None]]  # name -> aggregation over the records
    keep: Callable[[Doc], bool] | None = None  # which documents of the table belong to the task
    generation: Mapping[str, Any] = field(default_factory=dict)  # lmms-eval generation_kwargs
    description: str = ""


def metric_names(task: HarnessTask) -> tuple[str, ...]:
    """The task's own metrics, then the counts every task reports (``COUNTS``)."""
    return (*task.metrics, *COUNTS)


@dataclass(frozen=True)
class Harness:
    """A benchmark's harness tasks (a group), or none with the reason (``note``)."""

    tasks: tuple[HarnessTask, ...] = ()
    note: str = ""  # what a user should know: the judge used, what is left to mmcurate evaluate and why


def with_placeholders(doc: Doc) -> tuple[dict[str, Any], dict[str, Any]]:
    """The document with every decoded image (``image``/``images``, also inside contexts)
    replaced by a placeholder name, and the names' images."""
    images: dict[str, Any] = {}

    def name(image: Any) -> str | None:
        if image is None:
            return None
        key = f"{PLACEHOLDER}{len(images)}"
        images[key] = image
        return key

    def swap(value: Any, key: str = "") -> Any:
        if key == "image":
            return name(value)
        if key == "images":
            return [name(v) for v in value or []]
        if isinstance(value, Mapping):
            return {k: swap(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    swapped = swap(dict(doc))
    # lmms-eval hands doc_to_text a copy of the document without its image columns
    # (``dataset_no_image``): they read as no image there
    swapped.setdefault("images", [])
    swapped.setdefault("image", None)
    return swapped, images


def _parts(content: Any) -> list[dict]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def harness_messages(messages: Sequence[dict], images: Mapping[str, Any], text_only: bool) -> list[dict]:
    """mmcurate request messages in lmms-eval's chat shape (every content a list of parts;
    an image part ``{"type": "image", "url": <PIL image>}``), images dropped when ``text_only``."""
    out = []
    for message in messages:
        parts = []
        for part in _parts(message["content"]):
            if part["type"] == "image":
                if not text_only:
                    parts.append({"type": "image", "url": images[part["sha256"]]})
            else:
                parts.append({"type": "text", "text": part["text"]})
        out.append({"role": message["role"], "content": parts})
    return out


@dataclass(frozen=True)
class Bound:
    """A task's lmms-eval functions (the names an exported ``utils.py`` binds)."""

    task: HarnessTask
    text_only: bool

    def _messages(self, doc: Doc, text_only: bool) -> list[dict]:
        swapped, images = with_placeholders(doc)
        return harness_messages(self.task.request(swapped), images, text_only)

    def doc_to_messages(self, doc: Doc, **_: Any) -> list[dict]:
        return self._messages(doc, self.text_only)

    def doc_to_visual(self, doc: Doc) -> list[Any]:
        return [
            part["url"]
            for message in self.doc_to_messages(doc)
            for part in message["content"]
            if part["type"] == "image"
        ]

    def doc_to_text(self, doc: Doc, lmms_eval_specific_kwargs: Any = None) -> str:
        """The text of every message, in order (system prompt first), images left out."""
        return "\n\n".join("\n".join(p["text"] for p in m["content"]) for m in self._messages(doc, True))

    def doc_to_target(self, doc: Doc) -> str:
        return self.task.target(doc)

    def process_results(self, doc: Doc, results: Sequence[Any]) -> dict[str, dict[str, Any]]:
        reply = _text(results[0]) if results else ""
        record = (
            {"sample_id": doc.get("sample_id"), FAILED: reply}
            if reply.startswith(FAILED_REPLY)
            else self.task.record(doc, reply)
        )
        return {name: record for name in metric_names(self.task)}

    def process_docs(self, dataset: Any) -> Any:
        keep = self.task.keep
        return dataset if keep is None else dataset.filter(lambda doc: keep(doc))

    def aggregation(self, metric: str) -> Callable[[Records], Any]:
        """The metric over the task's graded records (None when none was graded), or one of
        ``COUNTS`` over all of them."""
        if metric == GRADED:
            return lambda records: sum(FAILED not in r for r in records)
        if metric == FAILED_REQUESTS:
            return lambda records: sum(FAILED in r for r in records)
        if metric == FAILED_SAMPLES:
            return lambda records: [r["sample_id"] for r in records if FAILED in r]
        rate = self.task.metrics[metric]

        def aggregate(records: Records) -> float | None:
            graded = [r for r in records if FAILED not in r]
            return rate(graded) if graded else None

        return aggregate


def _text(result: Any) -> str:
    """lmms-eval hands a generation as a string (older models) or an object with ``text``."""
    return result if isinstance(result, str) else str(getattr(result, "text", result))


def bind(harness: Harness, text_only: bool = False) -> dict[str, Bound]:
    return {task.name: Bound(task, text_only) for task in harness.tasks}


def load_harness(settings_file: Path) -> dict[str, Bound]:
    """The bound tasks an exported folder's ``harness.json`` names: the benchmark's harness
    (``"module:attribute"``, called with the release values recorded there)."""
    data = json.loads(Path(settings_file).read_text())
    return bind(harness_of(data["harness"], data["release"]), bool(data["text_only"]))


def harness_of(factory: str, release: Mapping[str, Any]) -> Harness:
    """The harness ``factory`` (``"module:attribute"``) builds for a release's values."""
    module, _, attribute = factory.partition(":")
    return getattr(importlib.import_module(module), attribute)(release)
