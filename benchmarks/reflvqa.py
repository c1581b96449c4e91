"""RefLVQA (seed 004): long-form visual QA from Reddit with sentence-level citations.

Its code, layer by layer (``tests/benchmarks/test_module_lists.py`` keeps this list equal to the tree):

- sources: ``reddit`` (``sources/reddit.py``, pushshift dumps)
- ``annotation/reflvqa/``: ``relevance.py``, ``necessity.py``, ``factcheck.py``, ``citations.py`` (the
  four curation stages, section 3), ``verification.py`` (optional claim-level verification),
  ``recheck.py`` (a re-curation's new entailment judge)
- ``evaluation/reflvqa/``: ``grid.py`` (the evaluation grid, section 4), ``settings.py`` (its RAG
  settings), ``subset.py`` (the human-verified pairs), ``queries.py``, ``answers.py``,
  ``cited_answers.py``, ``grounding.py`` (section 6.2), ``prompts.py``, ``graders.py`` (the three
  evaluators), ``answer_metrics.py`` (Table 5), ``report.py`` (what a run writes), ``harness.py``
- ``releases/reflvqa/``: ``draft.py`` (a run as a release), ``tables.py`` (its tables), ``checks.py``
- ``review/reflvqa/``: ``citations.py`` (human verification of citations), ``label_studio.py`` (the
  same as a Label Studio project), ``judges.py`` (the evaluators against people)
- ``planning/reflvqa/``: ``curation.py`` (a curation's calls), ``evaluation.py`` (an evaluation grid's)
- ``flows/reflvqa/``: ``curate.py``, ``recurate.py``, ``evaluate.py``
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from mmcurate.core.config import BenchmarkSection, ModelSpec, Section, SourceSpec, StrictModel
from mmcurate.core.specs import (
    LLM,
    ClaimExtractorSpec,
    CrossModalSpec,
    CutoffSpec,
    EntailmentSpec,
    GraderSpec,
    Heuristic,
    KBSpec,
    LabellerSpec,
    Lexical,
    MiniLM,
    RerankerSpec,
    TextEncoderSpec,
    WikiOffline,
    model_names,
)

from .benchmark import Benchmark, Evaluation
from .shared import ClaimGate, Decoding


class SentenceVerification(StrictModel):
    """RefLVQA's optional Kestrel stage (``annotation.reflvqa.verification``): typed claims from
    every fact-checkable sentence, checked by ``verifier`` against the sentence's retrieved text
    documents; a sentence's citations change only through the gate."""

    verifier: str = Field(min_length=1)  # a model of the config; replies with JSON records
    claims: ClaimExtractorSpec = Heuristic()  # 'heuristic' (rule-based stand-in) or a model name
    gate: ClaimGate = Field(default_factory=ClaimGate)


class RefLVQAConfig(BenchmarkSection):
    @field_validator("text_corpus", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    source: SourceSpec
    cross_modal_encoder: CrossModalSpec | None = None  # None skips the image-relevance filter
    distractor_images: int = Field(default=100, ge=0)
    relevance_top_k: int = Field(default=10, ge=1)
    inspectors: list[str] = Field(default_factory=list)  # text-only models
    evaluator: GraderSpec | None = None  # grades inspector answers right/wrong
    max_right_inspectors: int = Field(default=1, ge=0)
    factcheck_model: LabellerSpec | None = None  # marks fact-checkable sentences
    text_corpus: list[KBSpec] = Field(default_factory=lambda: list[KBSpec]([WikiOffline()]))  # searched as one
    text_corpus_limit: int | None = Field(default=None, ge=1)
    image_corpus: Path | None = None  # folder of images; None: the posts' own images
    top_text: int = Field(default=5, ge=1)
    top_images: int = Field(default=5, ge=0)
    cutoff: CutoffSpec | None = None  # cut each sentence's top_text documents before entailment
    text_entailment: EntailmentSpec = Lexical()
    image_entailment: str | None = None  # a vision model name; None: image citations skipped
    verification: SentenceVerification | None = None  # None: no claim-level verification
    seed: int = Field(default=0, ge=0)
    version: str = "1.0.0"

    def sources_at(self, name: str) -> list[tuple[str, SourceSpec]]:
        return [(f"{name}.source", self.source)]

    def roles(self, judge: str | None) -> list[tuple[str, str]]:
        roles = {
            "inspector": self.inspectors,
            "evaluator": model_names(self.evaluator),
            "factcheck": model_names(self.factcheck_model),
            "image_entailment": [self.image_entailment] if self.image_entailment else [],
            "text_entailment": model_names(self.text_entailment),
            "claim_verifier": [self.verification.verifier] if self.verification else [],
            "claim_extractor": model_names(self.verification.claims) if self.verification else [],
        }
        return [(role, name) for role, names in roles.items() for name in names]

    def recuration_roles(self) -> tuple[str, ...]:
        return ("inspector", "text_entailment")

    def add_recuration_model(self, role: str, name: str) -> None:
        """A new inspector joins the others (the necessity rule counts it); a new text
        entailment model replaces the judge of the citations (``llm:<name>``)."""
        if role == "inspector":
            if name not in self.inspectors:
                self.inspectors = [*self.inspectors, name]
        else:
            self.text_entailment = LLM(model=name)


class Evaluators(StrictModel):
    """Who grades RefLVQA answers, per metric: ``lexical[:<threshold>]`` (the offline
    token-overlap stand-in, named in every output) or a model name. A single string sets all three."""

    groundedness: GraderSpec = Lexical()
    completeness: GraderSpec = Lexical()
    relevance: GraderSpec = Lexical()


class Generation(Decoding):
    """The evaluated model's decoding in a RefLVQA evaluation (seed 004, appendix C.2: "Nucleus
    sampling with T = 0.7 and p = 0.95"; "rescaled such that the maximum dimension ... did not
    exceed 512 pixels"; the 2,048 new tokens are ``answer_max_tokens``). C.2 names no
    repetition penalty: 1.0, none. ``override`` as in DeflectionBench's ``Decoding``; no model is a
    closed API by default (``closed_apis: []``): C.2 states the settings for every model evaluated."""

    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    top_p: float = Field(default=0.95, gt=0.0, le=1.0)
    repetition_penalty: float = Field(default=1.0, gt=0.0, le=2.0)
    image_max_side: int | None = Field(default=512, ge=1)  # None: images as stored
    closed_apis: list[str] | None = Field(default_factory=list)


class RefLVQAEvalConfig(Section):
    """RefLVQA's evaluation grid (evaluation/reflvqa/grid.py): per search query retrieve
    ``candidates``, rerank, keep ``top_k``; the readings the paper leaves open are named here."""

    @field_validator("evaluators", mode="before")
    @classmethod
    def _one_for_all(cls, value: Any) -> Any:
        return {"groundedness": value, "completeness": value, "relevance": value} if isinstance(value, str) else value

    top_k: int = Field(default=5, ge=1)  # K documents per search query (the paper's K = 5)
    cutoff: CutoffSpec | None = None  # e.g. 'mad' (CRUISE's MAD rule) in top_k's place; None: the fixed top_k
    candidates: int = Field(default=100, ge=1)
    text_encoder: TextEncoderSpec = MiniLM()
    cross_modal_encoder: CrossModalSpec | None = None  # None: image documents found by their source captions
    # 'average': query with the mean of the query-text and question-image embeddings wherever the
    # encoder embeds images (the paper's MM-Embed reading, Table 4); 'text': the query text alone
    query_embedding: Literal["average", "text"] = "average"
    reranker: RerankerSpec = MiniLM()
    # 'rerank': one reranking stage scores the text and image candidates on one scale and keeps the
    # top K by score (004 section 5.1: the reranker selects the top K of the top 100); 'rrf': text
    # reranked, images in first-stage order, the two rankings fused by reciprocal rank
    fusion: Literal["rerank", "rrf"] = "rerank"
    doc_chars: int = Field(default=2000, ge=1)  # a document's text is cut to this for the answering model
    query_max_tokens: int = Field(default=32, ge=1)  # reply budget per search query the model writes
    answer_max_tokens: int = Field(default=2048, ge=1)  # new tokens per answer (004, C.2: 2,048)
    decoding: Generation = Field(default_factory=Generation)  # the evaluated model's sampling (004, C.2)
    # Two-step MultiRAG: 'shared' splits MultiRAG's documents by modality (Table 5 retrieves the
    # same for both); 'per_modality' takes TextRAG's and ImageRAG's documents
    two_step_documents: Literal["shared", "per_modality"] = "shared"
    # Two-step: a vision model of the config writes each image document's caption; None: the
    # caption the document's source gives it (title, alt text), a stand-in named in the table
    captioner: str | None = Field(default=None, min_length=1)
    caption_max_tokens: int = Field(default=128, ge=1)
    evaluators: Evaluators = Field(default_factory=Evaluators)
    # 'per_answer': Mean, @1.0 and @0.5 per answer, then the mean over answers (004 section 4.2);
    # 'pooled': over the sentence grades of all answers pooled
    score_average: Literal["per_answer", "pooled"] = "per_answer"
    # 'keep': the N x K documents as retrieved, each with its own number (004 section 4, Table 5's
    # N = 4 row retrieves 20); 'merge': a document several queries found shown once
    duplicates: Literal["keep", "merge"] = "keep"
    # 'verified': the QA pairs with human-verified sentences (004 section 3.3, what section 5
    # evaluates), read from verified_labels; without labels every pair, said in the notes; 'all'
    subset: Literal["verified", "all"] = "verified"
    verified_labels: Path | None = None  # human_verified.parquet of `mmcurate annotate import`, or its folder
    # image-self-refine (004 appendix C.1): "finalized when the combined score reaches 6 or when
    # three iterations have been completed" (scores 0-9: three traits of 0-3, Table 18)
    self_refine_stop: int = Field(default=6, ge=0, le=9)
    self_refine_rounds: int = Field(default=3, ge=1, le=10)

    def references(self, judge: str | None) -> list[str]:
        graders = self.evaluators
        return (
            [
                name
                for spec in (graders.groundedness, graders.completeness, graders.relevance)
                for name in model_names(spec)
            ]
            + ([self.captioner] if self.captioner else [])
            + list(self.decoding.closed_apis or [])
        )

    def check_models(self, models: Mapping[str, ModelSpec]) -> None:
        if self.captioner and not models[self.captioner].vision:
            raise ValueError(
                f"evaluation.reflvqa.captioner: model {self.captioner!r} does not see images (vision: false); "
                "name a vision model, or leave it unset for the source captions (a stand-in)"
            )


BENCHMARK = Benchmark(
    name="reflvqa",
    config=RefLVQAConfig,
    evaluation_config=RefLVQAEvalConfig,
    curated=True,
    title="RefLVQA (long-form visual QA with sentence-level citations)",
    paper="004_ab89136aadc415d7.txt",
    sources=("reddit",),
    evaluation=Evaluation(
        options=("settings", "queries", "subset"),
    ),
)
