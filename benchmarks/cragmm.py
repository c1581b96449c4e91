"""CRAG-MM (KDD Cup 2025), the benchmark CRUISE (seed 001) reports on: ingested and published
unfiltered, evaluated plain or through CRUISE's answering system.

Its code, layer by layer (``tests/benchmarks/test_module_lists.py`` keeps this list equal to the tree):

- sources: ``cragmm`` (``sources/cragmm.py``, the Hub snapshots)
- ``evaluation/cragmm/``: ``cruise.py`` (CRUISE's answering system), ``report.py`` (the CRAG table of
  a run), ``harness.py`` (the vision-only task for lmms-eval); CRAG scoring and verification-first
  answering, which DeflectionBench shares, sit at ``evaluation/``'s top
- ``releases/cragmm/``: ``draft.py`` (an ingest as a release), ``checks.py``
- ``flows/cragmm/``: ``curate.py``, ``evaluate.py``
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from mmcurate.core.config import BenchmarkSection, Section, Sources, StrictModel
from mmcurate.core.specs import (
    CutoffSpec,
    Descriptor,
    ImageEncoderSpec,
    KBSpec,
    MadCutoff,
    MiniLM,
    RerankerSpec,
    TextEncoderSpec,
)

from .benchmark import Benchmark, Evaluation
from .shared import PromptFile


class CragMMConfig(BenchmarkSection):
    """CRAG-MM, the benchmark CRUISE reports on (seed 001): its public single- and multi-turn
    sets ingested (quarantine with reasons) and published unfiltered as a validated release."""

    sources: Sources  # cragmm: the Hub snapshots of both sets under one root, or several roots
    seed: int = Field(default=0, ge=0)
    version: str = "1.0.0"

    def roles(self, judge: str | None) -> list[tuple[str, str]]:
        return []  # the curation asks no model


class CragmmSearch(StrictModel):
    """The competition's search package (``cragmm-search-pipeline``, optional extra
    ``mmcurate[cragmm-search]``) as CRUISE's retriever: ``UnifiedSearchPipeline`` arguments."""

    image_model_name: str = Field(min_length=1)  # a CLIP model id or local folder
    image_hf_dataset_id: str = Field(min_length=1)  # the image search index (a Hub dataset id)
    text_model_name: str | None = None  # with web_hf_dataset_id: the web search
    web_hf_dataset_id: str | None = None


SummaryPromptName = Literal["summary_system", "summary_request"]
QUERY = "{query}"  # where the summary request takes the question


class SummaryPromptFile(PromptFile):
    """CRUISE's image-summary prompt (eq. 1) from a YAML file: ``summary_system`` and/or
    ``summary_request`` (which must hold ``{query}``, where the question goes); a name left out
    keeps the built-in text (``evaluation.cragmm.cruise``). The way to run the paper's own wording
    (appendix A.2), which the code does not carry."""

    # other template names than the base class's (a field pydantic validates by its own type)
    templates: dict[SummaryPromptName, str] | None = None  # type: ignore[assignment]

    @field_validator("templates")
    @classmethod
    def _query(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value and "summary_request" in value and QUERY not in value["summary_request"]:
            raise ValueError(f"summary_request must hold {QUERY} (where the question goes)")
        return value


class CruiseConfig(Section):
    """CRUISE's answering system on CRAG-MM (seed 001, section 3; ``evaluation.cragmm.cruise``).

    Models default to the answering model (the paper uses one VLM for the summary, the answers
    and both checks, and a small LLM as router). ``search`` is eq. 3's branch: ``image`` (the
    image knowledge graph, Task 1, the paper's reported setting), ``web`` (text search with
    q' = q || s) or ``both`` (Tasks 2 and 3)."""

    router: str | None = None
    summariser: str | None = None  # eq. 1's query-aware image summary (needs a vision model)
    search: Literal["image", "web", "both"] = "image"
    image_index: Path | None = None  # folder with kg.jsonl: image -> entities (retrieval.cragmm_search)
    web_index: KBSpec | None = None  # web pages {doc_id, title, text}
    cragmm_search: CragmmSearch | None = None  # the competition's search package instead of the two above
    image_encoder: ImageEncoderSpec = Descriptor()
    text_encoder: TextEncoderSpec = MiniLM()
    reranker: RerankerSpec = MiniLM()
    kg_fields: list[str] = Field(default_factory=lambda: ["description", "caption", "summary"], min_length=1)
    k_recall: int = Field(default=10, ge=1, le=100)  # K_recall of eq. 3
    cutoff: CutoffSpec = Field(default_factory=MadCutoff)  # eq. 5-6: tau 0.1, lambda 1.5, K_rerank 3 (or top_k:K)
    tau_ret: float = Field(default=0.5, ge=0.0, le=1.0)  # Algorithm 1's minimum retrieval score (no value in the paper)
    retrieval_gate: Literal["score", "context"] = "score"  # S_ret < tau_ret, or the older "no context survived"
    tau_low: float = Field(default=0.9, ge=0.0, le=1.0)  # verifier confidence with context
    tau_high: float = Field(default=1.0, ge=0.0, le=1.0)  # without context
    turn_seconds: float | None = Field(default=10.0, gt=0.0, le=3600.0)  # the per-turn budget; None: none
    multi_turn_scoring: Literal["competition", "conversation"] = "competition"
    summary_max_tokens: int = Field(default=64, ge=1, le=1024)
    summary_prompt: SummaryPromptFile | None = None  # None: the built-in wording (evaluation/cragmm/cruise.py)

    @model_validator(mode="after")
    def _consistent(self) -> CruiseConfig:
        if self.tau_low > self.tau_high:
            raise ValueError(f"cruise.tau_low ({self.tau_low}) must not exceed cruise.tau_high ({self.tau_high})")
        if self.cragmm_search is None:
            if self.search in ("image", "both") and self.image_index is None:
                raise ValueError(f"cruise.search {self.search} needs cruise.image_index (or cruise.cragmm_search)")
            if self.search in ("web", "both") and self.web_index is None:
                raise ValueError(f"cruise.search {self.search} needs cruise.web_index (or cruise.cragmm_search)")
        return self

    def references(self, judge: str | None) -> list[str]:
        return [name for name in (self.router, self.summariser) if name]

    def read_files(self, where: str) -> None:
        """Read the summary-prompt file (after its path is resolved)."""
        if self.summary_prompt is not None:
            self.summary_prompt = self.summary_prompt.read_at(f"{where}.summary_prompt")


BENCHMARK = Benchmark(
    name="cragmm",
    config=CragMMConfig,
    sections={"cruise": CruiseConfig},  # CRUISE's answering system (evaluate --system cruise)
    curated=True,
    title="CRAG-MM public sets (single- and multi-turn) as a validated release, for CRUISE's evaluation",
    paper="001_2a7b350a10561872.txt",
    sources=("cragmm",),
    evaluation=Evaluation(
        options=("system", "ablations", "task", "limit"),
    ),
)
