"""Plain record types that adapters yield, and their mapping onto the canonical schema."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from .ids import sample_id as make_sample_id

RAW_LIMIT = 2000  # characters of an offending record kept in quarantine


@dataclass(frozen=True)
class Context:
    context_id: str
    modality: str  # "text" | "image"
    text: str | None = None
    image: str | None = None  # sha256 in the image store
    title: str | None = None

    def __post_init__(self) -> None:
        if self.modality not in ("text", "image"):
            raise ValueError(f"context modality must be text or image, got {self.modality!r}")
        if self.modality == "image" and not self.image:
            raise ValueError(f"image context {self.context_id} has no image hash")

    def to_row(self) -> dict[str, Any]:
        return asdict(self)  # the fields are CONTEXT's columns, in order


@dataclass
class Sample:
    source: str
    source_id: str
    question: str
    answers: list[str]
    images: list[str] = field(default_factory=list)
    gold_contexts: list[Context] = field(default_factory=list)
    negative_contexts: list[Context] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def sample_id(self) -> str:
        return make_sample_id(self.source, self.source_id)

    def to_row(self) -> dict[str, Any]:
        return {
            "sample_id": self.sample_id,
            "source": self.source,
            "source_id": self.source_id,
            "question": self.question,
            "answers": list(self.answers),
            "images": list(self.images),
            "gold_contexts": [c.to_row() for c in self.gold_contexts],
            "negative_contexts": [c.to_row() for c in self.negative_contexts],
            "meta": json.dumps(self.meta, ensure_ascii=False, sort_keys=True),
        }


@dataclass(frozen=True)
class Rejected:
    """A raw record that did not become a sample, and why."""

    locator: str  # "<file>:<line>" or "<file>:<key>"
    reason: str
    raw: str | None = None

    def to_row(self, source: str) -> dict[str, Any]:
        raw = self.raw
        if raw is not None and len(raw) > RAW_LIMIT:
            raw = raw[:RAW_LIMIT] + "…[truncated]"
        return {"source": source, "locator": self.locator, "reason": self.reason, "raw": raw}
