"""POPE (object-hallucination probes), as Kestrel (seed 000) evaluates on it: published POPE
files or probes built from object annotations; and MME's hallucination subtasks (existence,
count, position, color), Kestrel's MME-Hallucination, read as probes of the same release (dataset
``mme``, the subtask as the split) and scored by MME's score beside POPE's metrics. Evaluated
plain or through Kestrel's loop.

Its code, layer by layer (``tests/benchmarks/test_module_lists.py`` keeps this list equal to the tree):

- sources: ``pope``, ``pope_objects``, ``mme`` (``sources/<name>.py``)
- ``annotation/pope/``: ``balance.py`` (every split balanced)
- ``evaluation/pope/``: ``probes.py`` (POPE's evaluation, plain or through Kestrel), ``kestrel.py``
  (Kestrel's loop), ``mme.py`` (MME's score), ``harness.py`` (the probes as lmms-eval tasks)
- ``releases/pope/``: ``draft.py`` (a curation as a release), ``checks.py``
- ``flows/pope/``: ``curate.py``, ``evaluate.py``
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from mmcurate.core.config import BenchmarkSection, Section, Sources, StrictModel
from mmcurate.core.specs import GroundingSpec, Saliency, SegmenterSpec, model_names

from .benchmark import Benchmark, Evaluation
from .shared import ClaimGate


class PopeConfig(BenchmarkSection):
    """POPE probes (Kestrel's benchmark, seed 000 4.1; see flows/pope/curate.py): published POPE files
    (source ``pope``) or probes built from object annotations (``pope_objects``)."""

    sources: Sources
    seed: int = Field(default=0, ge=0)  # which surplus probes go when a split is unbalanced
    version: str = "1.0.0"

    def roles(self, judge: str | None) -> list[tuple[str, str]]:
        return []  # curating probes asks no model


class KestrelConfig(StrictModel):
    """Kestrel's loop around the evaluated model (seed 000; ``evaluation.pope.kestrel``): the grounding
    agent, who verifies, the change gate and the rounds (``gate``), and the optional Yes-guard."""

    grounding: GroundingSpec | None = None  # the grounding agent; needed for --system kestrel
    segmenter: SegmenterSpec | None = None  # SAM 2 masks for the grounded instances (segmentation overlays)
    verifier: str | None = None  # None: the evaluated model judges the evidence (the paper's LVLM-as-a-judge)
    gate: ClaimGate = Field(default_factory=ClaimGate)  # per-type thresholds in [0.82, 0.90], 3 rounds, 2 stable
    yes_guard: bool = False  # the appendix's optional check of an initial Yes (off in the main text)
    zoom: float = Field(default=2.0, ge=1.0, le=8.0)  # crop-and-zoom enlargement of a target's union box
    # SAM3's instance confidence (seed 000 section 4.1, implementation details: "a confidence threshold
    # of 0.5 (with a recheck threshold of 0.35 when needed for existence claim)"): a grounder's scored
    # instance below detection_threshold is left out; an existence target left with none is looked at
    # again at recheck_threshold. Instances a grounder gives no score (boxes, pointing) all count.
    detection_threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    recheck_threshold: float = Field(default=0.35, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _recheck_lower(self) -> KestrelConfig:
        if self.recheck_threshold > self.detection_threshold:
            raise ValueError(
                f"recheck_threshold ({self.recheck_threshold:g}) cannot exceed detection_threshold "
                f"({self.detection_threshold:g}): the recheck looks again, more leniently"
            )
        return self

    def detector_record(self) -> dict[str, float]:
        """The detector settings a Kestrel run records (``release.json``'s ``detector``)."""
        return {"detection_threshold": self.detection_threshold, "recheck_threshold": self.recheck_threshold}

    @field_validator("grounding")
    @classmethod
    def _looks_for_targets(cls, value: Any) -> Any:
        if isinstance(value, Saliency):
            raise ValueError(
                "kestrel grounding must look for the claim's targets; 'saliency' ignores them "
                "(use 'boxes:<regions>' or 'pointing:<model>')"
            )
        return value


class PopeEvalConfig(Section):
    kestrel: KestrelConfig = Field(default_factory=KestrelConfig)

    def references(self, judge: str | None) -> list[str]:
        return model_names(self.kestrel.grounding) + ([self.kestrel.verifier] if self.kestrel.verifier else [])


BENCHMARK = Benchmark(
    name="pope",
    config=PopeConfig,
    evaluation_config=PopeEvalConfig,
    curated=True,
    title="POPE and MME-Hallucination probes (object-hallucination yes/no questions; published files, or built "
    "from object annotations)",
    paper="000_2a76f793a2e194d6.txt",
    sources=("pope", "pope_objects", "mme"),
    evaluation=Evaluation(
        options=("system", "oracle_grounding"),
    ),
)
