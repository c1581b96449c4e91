"""Typed configuration: one YAML file per pipeline setting, overridable from the environment.

Precedence, highest first: keyword overrides, ``MMCURATE_*`` environment variables
(nested with ``__``, e.g. ``MMCURATE_DEFLECTIONBENCH__K_MIN=3``), then the YAML file.
A model is named in a variable by its name with every character other than a letter or a
digit written as ``_`` (shells allow no ``-`` in a variable name), in any case:
``MMCURATE_MODELS__SMOLLM2_WARM__MAX_TOKENS=16`` reaches the model ``smollm2-warm``.
Relative paths in the file are resolved against the file's own directory; relative paths
given in the environment against the current directory, where the user typed them.
Secrets never live here: a model names the environment variable or Prefect Secret
block that holds its key.
"""
from __future__ import annotations

import hashlib
import re
from abc import abstractmethod
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from .errors import ConfigError
from .plural import counted
from .specs import (
    CaptionSpec,
    ClaimExtractorSpec,
    CutoffSpec,
    Descriptor,
    EntailmentSpec,
    GraderSpec,
    GroundingSpec,
    Heuristic,
    ImageEncoderSpec,
    CrossModalSpec,
    KBSpec,
    LabellerSpec,
    LLM,
    Lexical,
    MadCutoff,
    MiniLM,
    RerankerSpec,
    Saliency,
    SegmenterSpec,
    Template,
    TextEncoderSpec,
    WikiOffline,
    model_names,
)
from .visual_prompts import COLORS, MARK_TYPES, Color, MarkType


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSpec(_Strict):
    """One model as the pipeline sees it. ``name`` is its id in ledgers and caches."""

    name: str
    backend: Literal["openai", "vllm", "embedded", "scripted"]
    model: str = ""  # model id at the endpoint, e.g. "Qwen/Qwen2.5-VL-32B-Instruct"
    revision: str = "unversioned"  # part of the cache identity: bump when weights change
    base_url: str | None = None  # openai backend; None means api.openai.com
    api_key_env: str | None = None  # environment variable holding the key
    api_key_block: str | None = None  # or a Prefect Secret block name
    vision: bool = False
    temperature: float = Field(default=0.2, ge=0.0, le=2.0)  # the OpenAI API's range
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    repetition_penalty: float = Field(default=1.05, gt=0.0)  # 1: none (vLLM, llama.cpp)
    max_tokens: int = Field(default=128, ge=1)
    seed: int | None = Field(default=0, ge=0)  # llama.cpp reads a negative seed as "random": not reproducible
    concurrency: int = Field(default=4, ge=1)  # 0 would never send a request: the run would hang
    timeout: float = Field(default=120.0, gt=0.0)  # seconds per request
    max_retries: int = Field(default=4, ge=0)
    # embedded: which packaged GGUF the local llama.cpp server loads (a chat model: the only
    # one a package ships is SmolLM2-135M-Instruct)
    gguf: Literal["smollm2"] | None = None
    n_ctx: int = Field(default=2048, ge=1)
    # scripted: JSONL rules and the fallback answer
    script: Path | None = None
    default: str | None = None
    # vllm offline: extra engine arguments (tensor_parallel_size, max_model_len, ...)
    engine_args: dict[str, Any] = Field(default_factory=dict)
    # a local tokenizer.json (or a folder holding one) of this model: counts its tokens, e.g. the
    # 75 answer tokens a CRAG judge sees (evaluation.crag); None: the model has no known tokenizer
    tokenizer: Path | None = None
    # cost plan (``mmcurate plan``; defaults and their sources in planning/throughput.py)
    tokens_per_second: float | None = Field(default=None, gt=0)  # per GPU, prompt + completion; None: by size
    image_tokens: int = Field(default=256, ge=0)  # prompt tokens one image costs this model
    price_input_per_mtok: float = Field(default=0.0, ge=0)  # USD per 1M prompt tokens (0: local model)
    price_output_per_mtok: float = Field(default=0.0, ge=0)  # USD per 1M completion tokens

    @model_validator(mode="after")
    def _backend_fields(self) -> "ModelSpec":
        if self.backend == "scripted" and self.script is None:
            raise ValueError(f"model {self.name}: backend scripted needs 'script'")
        if self.backend == "embedded" and self.gguf is None:
            self.gguf = "smollm2"
        if self.backend in ("openai", "vllm") and not self.model:
            raise ValueError(f"model {self.name}: backend {self.backend} needs 'model'")
        return self

    def identity(self) -> dict[str, Any]:
        """What makes two answers comparable: enters the response-cache key and manifests."""
        return {
            "name": self.name,
            "backend": self.backend,
            # a script by its file name: the path is the builder's; its content is in the cache key
            "model": self.model or self.gguf or (self.script.name if self.script else ""),
            "revision": self.revision,
            "vision": self.vision,
        }


class JudgeSpec(_Strict):
    """``lexical``: the embedded deterministic judge. ``llm``: pre-judge, then ``model``."""

    kind: Literal["lexical", "llm"] = "lexical"
    model: str | None = None  # a key of Settings.models

    @model_validator(mode="after")
    def _needs_model(self) -> "JudgeSpec":
        if self.kind == "llm" and not self.model:
            raise ValueError("judge kind llm needs 'model'")
        return self


class SourceSpec(_Strict):
    name: str  # adapter name: reddit, infoseek, evqa, webqa, mmdocrag, mragbench, viquae
    root: Path
    images: Path | None = None
    options: dict[str, Any] = Field(default_factory=dict)  # the adapter's options, checked before a run starts
    limit: int | None = Field(default=None, ge=1)  # curate only the first N ingested samples (dry runs, demos)


LeakageFilter = Literal["none", "answer", "answer_or_overlap"]


class RetrievalConfig(_Strict):
    """Stage II of DeflectionBench: what is searched, with which encoders, how it is cut.

    ``leakage_filter`` names which mined passages are removed before reranking besides the
    gold contexts themselves (annotation/deflectionbench/mining.py): ``none`` (the paper's eq. 2;
    leaks are left to the eq. 5 distractor check), ``answer`` (also passages holding a gold
    answer) or ``answer_or_overlap`` (also passages overlapping a gold text)."""

    text_encoder: TextEncoderSpec = MiniLM()
    image_encoder: ImageEncoderSpec = Descriptor()
    kb: KBSpec = WikiOffline()  # documents {doc_id, title, text} (see retrieval.kb)
    kb_limit: int | None = Field(default=None, ge=1)  # use only the first N KB documents (demo speed)
    chunk_unit: Literal["tokens", "words"] = "tokens"
    chunk_size: int = Field(default=250, ge=1)
    chunk_overlap: int = Field(default=32, ge=0)
    reranker: RerankerSpec = MiniLM()
    max_text_negatives: int = Field(default=10, ge=0)
    leakage_filter: LeakageFilter = "none"
    # memory for the KB's vector index (retrieval.index_plan): a KB whose vectors fit keeps the
    # in-memory flat/IVF index; a larger one gets an on-disk store and a compressed index
    memory_gb: float = Field(default=4.0, ge=0.25, le=4096)
    # pages the text encoder embeds per second, for `mmcurate plan` (default: planning.throughput)
    encoder_pages_per_second: float | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, value: Any) -> Any:
        moved = sorted({"top_pages", "top_images"} & set(value)) if isinstance(value, dict) else []
        if moved:
            raise ValueError(f"{', '.join(moved)} moved to deflectionbench.mining.<source>.top_k (seed 003 retrieves "
                             "per source: see annotation/deflectionbench/mining.py)")
        return value

    @model_validator(mode="after")
    def _overlap_below_size(self) -> "RetrievalConfig":
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_size ({self.chunk_size})")
        return self


MiningStrategy = Literal["image_to_text", "image_to_image_pages", "image_to_image", "source"]


class SourceMining(_Strict):
    """How Stage II finds one source's negatives (annotation/deflectionbench/mining.py; seed 003,
    appendix "Knowledge pairing"): ``image_to_text`` (KB pages retrieved for the query, the top
    ``top_k`` cut into passages and reranked), ``image_to_image_pages`` (KB pages whose first image
    is nearest the query image, the top ``top_k`` cut and reranked), ``image_to_image`` (the
    ``top_k`` nearest images of the source's own pool, gold excluded) or ``source`` (the
    negatives the source provides; no retrieval)."""

    strategy: MiningStrategy
    top_k: int = Field(default=10, ge=1, le=1000)


# the strategies that may search the KB's pages by text embedding (image_to_image_pages does when the KB names no
# page image)
PAGE_STRATEGIES = ("image_to_text", "image_to_image_pages")
# the appendix's paragraph on retrieval per dataset (seed 003)
PAPER_MINING: dict[str, SourceMining] = {
    "infoseek": SourceMining(strategy="image_to_text", top_k=10),
    "viquae": SourceMining(strategy="image_to_text", top_k=10),
    "evqa": SourceMining(strategy="image_to_image_pages", top_k=5),
    "mragbench": SourceMining(strategy="image_to_image", top_k=20),
    "webqa": SourceMining(strategy="source"),
    "mmdocrag": SourceMining(strategy="source"),
}


Rule = Literal["all_incorrect", "none_correct"]


class GatingConfig(_Strict):
    """The gating models and the two rules that read their grades (see gating/parametric.py
    for Stage I and annotation/deflectionbench/oracle.py for Stage III solvability)."""

    pool: list[str] = Field(min_length=1)  # ordered keys of Settings.models
    rule: Rule = "all_incorrect"  # Stage I: keep only if every model is INCORRECT without context
    oracle_rule: Rule = "all_incorrect"  # Stage III: discard only if every model is INCORRECT with gold
    # Stage I and III prompts ask for a best guess when unsure (not the paper's: an abstention,
    # which drops a Stage I sample, then tends to become an INCORRECT answer, which keeps it)
    force_guess: bool = False


PromptName = Literal["parametric", "evidence", "best_guess", "eval_system",
                     "abstention_none", "abstention_soft", "abstention_moderate", "abstention_severe"]


class PromptFile(_Strict):
    """DeflectionBench's prompt templates from a YAML file mapping template names
    (gating/prompts.py) to their text; a name left out keeps its built-in text.

    Written in a config as the file's path. ``load_config`` reads the file and keeps its
    ``templates`` and ``sha256`` here, so the resolved config (and a release's manifest)
    holds the exact wording a run used, and a re-curation needs no copy of the file."""

    file: Path
    sha256: str | None = None
    templates: dict[PromptName, str] | None = None  # None until the file is read

    @model_validator(mode="before")
    @classmethod
    def _path(cls, value: Any) -> Any:
        return {"file": value} if isinstance(value, (str, Path)) else value

    @field_validator("templates")
    @classmethod
    def _texts(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        empty = sorted(name for name, text in (value or {}).items() if not text.strip())
        if empty:
            raise ValueError(f"empty prompt {'template' if len(empty) == 1 else 'templates'} {empty}")
        return value

    def read(self) -> "PromptFile":
        """This spec with the file's templates and sha256 (unchanged if they are already here)."""
        if self.templates is not None:
            return self
        try:
            raw = self.file.read_bytes()
            data = yaml.safe_load(raw)
        except OSError as exc:
            raise ConfigError(f"prompt templates {self.file}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"prompt templates {self.file} is not valid YAML: {exc}".replace("\n", " ")) from None
        if not isinstance(data, dict):
            raise ConfigError(f"prompt templates {self.file}: expected a mapping of template names to text")
        try:
            return PromptFile(file=self.file, sha256=hashlib.sha256(raw).hexdigest(), templates=data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ConfigError(f"prompt templates {self.file}: {where}: {first['msg']}") from None


Share = Annotated[float, Field(ge=0.0, le=1.0)]
# every benchmark's list of sources, one rule: an empty list is refused at load ("<benchmark>.sources:
# List should have at least 1 item"), before any run starts
Sources = Annotated[list[SourceSpec], Field(min_length=1)]


class TopicsConfig(_Strict):
    """The topic distribution before and after curation (seed 003, appendix C: BERTopic over
    question embeddings, reduced with UMAP, clustered with HDBSCAN "using cluster probability
    scores"; releases/topics.py, releases/topic_model.py).

    ``reading``: ``bertopic`` (the paper's) or ``source_fields`` (each source's own category
    field). UMAP and HDBSCAN sizes are BERTopic's defaults, capped for small pools (see
    ``topic_model.adapted``); below ``min_samples`` questions the source fields are read instead,
    and the card says so. ``outliers: probabilities`` gives HDBSCAN's outliers their most probable
    cluster (our reading of "using cluster probability scores"); ``keep`` leaves them a topic of
    their own. The paper embeds with OpenAI text-embedding-3-large; ``text_encoder`` stands in."""

    reading: Literal["bertopic", "source_fields"] = "bertopic"
    text_encoder: TextEncoderSpec = MiniLM()
    min_samples: int = Field(default=20, ge=5, le=1_000_000)
    n_neighbors: int = Field(default=15, ge=2, le=200)  # UMAP (BERTopic's default 15)
    n_components: int = Field(default=5, ge=2, le=100)  # UMAP (BERTopic's default 5)
    min_cluster_size: int = Field(default=10, ge=2, le=100_000)  # HDBSCAN (BERTopic's default 10)
    outliers: Literal["probabilities", "keep"] = "probabilities"


class BenchmarkSection(_Strict):
    """A benchmark's section of the config: its sources and the models its curation asks."""

    def sources_at(self, name: str) -> list[tuple[str, SourceSpec]]:
        """(config path, spec) of every source, e.g. ``("reflectv.sources[2]", spec)``; ``name``
        is the section's name."""
        return [(f"{name}.sources[{i}]", spec) for i, spec in enumerate(getattr(self, "sources"))]

    @abstractmethod
    def roles(self, judge: str | None) -> list[tuple[str, str]]:
        """(role, model name) of every model the curation asks, in pipeline order; ``judge``
        is the config's judge model, if the judge is one."""

    def recuration_roles(self) -> tuple[str, ...]:
        """The roles a re-curation can give new models (``--add-model ROLE=SPEC``), the default
        first; empty: this benchmark's releases are not re-curated."""
        return ()

    def add_recuration_model(self, role: str, name: str) -> None:
        """Give model ``name`` the re-curation ``role`` (one of ``recuration_roles``)."""
        raise ConfigError(f"{type(self).__name__} takes no re-curation models")


class DeflectionBenchConfig(BenchmarkSection):
    sources: Sources
    gating: GatingConfig
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    prompts: PromptFile | None = None  # None: the built-in templates of gating/prompts.py
    # per source, how Stage II finds negatives; a source left out keeps the paper's (PAPER_MINING)
    mining: dict[str, SourceMining] = Field(default_factory=lambda: dict(PAPER_MINING))
    topics: TopicsConfig = Field(default_factory=TopicsConfig)
    k_min: int = Field(default=5, ge=1)
    seed: int = Field(default=0, ge=0)
    version: str = "1.0.0"
    source_mix: dict[str, tuple[Share, Share]] = Field(default_factory=dict)  # source -> (min, max) share

    @field_validator("mining")
    @classmethod
    def _paper_mining(cls, value: dict[str, SourceMining]) -> dict[str, SourceMining]:
        return {**PAPER_MINING, **value}

    @model_validator(mode="after")
    def _every_source_mined(self) -> "DeflectionBenchConfig":
        missing = sorted({spec.name for spec in self.sources} - set(self.mining))
        if missing:
            raise ValueError(f"no mining strategy for source(s) {missing}: add deflectionbench.mining.<source>: "
                             "{strategy: image_to_text|image_to_image_pages|image_to_image|source, top_k: N}")
        return self

    @field_validator("source_mix")
    @classmethod
    def _low_high(cls, value: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        bad = {name: pair for name, pair in value.items() if pair[0] > pair[1]}
        if bad:
            raise ValueError(f"each share range is (min, max) with min <= max, got {bad}")
        return value

    def roles(self, judge: str | None) -> list[tuple[str, str]]:
        return [("gating", name) for name in self.gating.pool] + ([("judge", judge)] if judge else [])

    def recuration_roles(self) -> tuple[str, ...]:
        return ("gating",)

    def add_recuration_model(self, role: str, name: str) -> None:
        """A new gating model joins the pool after the models the release was made with."""
        if name not in self.gating.pool:
            self.gating.pool = [*self.gating.pool, name]


ClaimType = Literal["existence", "colour", "count", "position"]
CLAIM_THRESHOLDS: dict[str, float] = {"existence": 0.82, "colour": 0.86, "count": 0.90, "position": 0.86}
THRESHOLD_RANGE = (0.82, 0.90)  # Kestrel's per-type thresholds lie in this range (seed 000, L137)


class ClaimGate(_Strict):
    """Kestrel's change gate (``judging.claims``): a claim is confident at or above its type's
    threshold; at most ``max_rounds`` verification rounds, stopping after ``stable_rounds``
    supported rounds in a row. Types left out of ``thresholds`` keep their default."""

    thresholds: dict[ClaimType, float] = Field(default_factory=lambda: dict(CLAIM_THRESHOLDS))
    max_rounds: int = Field(default=3, ge=1)
    stable_rounds: int = Field(default=2, ge=1)

    @model_validator(mode="after")
    def _stable_within_max(self) -> "ClaimGate":
        if self.stable_rounds > self.max_rounds:
            raise ValueError(f"stable_rounds ({self.stable_rounds}) cannot exceed max_rounds ({self.max_rounds})")
        return self

    @field_validator("thresholds")
    @classmethod
    def _paper_range(cls, value: dict[str, float]) -> dict[str, float]:
        low, high = THRESHOLD_RANGE
        bad = {k: v for k, v in value.items() if not low <= v <= high}
        if bad:
            raise ValueError(f"claim thresholds must lie in [{low}, {high}] (Kestrel), got {bad}")
        return {**CLAIM_THRESHOLDS, **value}

    @model_validator(mode="after")
    def _reachable(self) -> "ClaimGate":
        if self.stable_rounds > self.max_rounds:
            raise ValueError(f"stable_rounds ({self.stable_rounds}) cannot exceed max_rounds ({self.max_rounds})")
        return self


class SentenceVerification(_Strict):
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
    text_corpus: list[KBSpec] = Field(default_factory=lambda: [WikiOffline()])  # searched as one
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
        roles = {"inspector": self.inspectors, "evaluator": model_names(self.evaluator),
                 "factcheck": model_names(self.factcheck_model),
                 "image_entailment": [self.image_entailment] if self.image_entailment else [],
                 "text_entailment": model_names(self.text_entailment),
                 "claim_verifier": [self.verification.verifier] if self.verification else [],
                 "claim_extractor": model_names(self.verification.claims) if self.verification else []}
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


class Evaluators(_Strict):
    """Who grades RefLVQA answers, per metric: ``lexical[:<threshold>]`` (the offline
    token-overlap stand-in, named in every output) or a model name. A single string sets all three."""

    groundedness: GraderSpec = Lexical()
    completeness: GraderSpec = Lexical()
    relevance: GraderSpec = Lexical()


class RefLVQAEvalConfig(_Strict):
    """RefLVQA's evaluation grid (evaluation/reflvqa.py): per search query retrieve
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
    doc_chars: int = Field(default=2000, ge=1)  # a document's text is cut to this for the answering model
    query_max_tokens: int = Field(default=32, ge=1)  # reply budget per search query the model writes
    answer_max_tokens: int = Field(default=512, ge=1)
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


class KestrelConfig(_Strict):
    """Kestrel's loop around the evaluated model (seed 000; ``evaluation.kestrel``): the grounding
    agent, who verifies, the change gate and the rounds (``gate``), and the optional Yes-guard."""

    grounding: GroundingSpec | None = None  # the grounding agent; needed for --system kestrel
    segmenter: SegmenterSpec | None = None  # SAM 2 masks for the grounded instances (segmentation overlays)
    verifier: str | None = None  # None: the evaluated model judges the evidence (the paper's LVLM-as-a-judge)
    gate: ClaimGate = Field(default_factory=ClaimGate)  # per-type thresholds in [0.82, 0.90], 3 rounds, 2 stable
    yes_guard: bool = False  # the appendix's optional check of an initial Yes (off in the main text)
    zoom: float = Field(default=2.0, ge=1.0, le=8.0)  # crop-and-zoom enlargement of a target's union box

    @field_validator("grounding")
    @classmethod
    def _looks_for_targets(cls, value: Any) -> Any:
        if isinstance(value, Saliency):
            raise ValueError("kestrel grounding must look for the claim's targets; 'saliency' ignores them "
                             "(use 'boxes:<regions>' or 'pointing:<model>')")
        return value


class PopeEvalConfig(_Strict):
    kestrel: KestrelConfig = Field(default_factory=KestrelConfig)


TABLE4_NEGATIVES = 2  # seed 003, Table 4's caption: "The number of negatives is fixed at 2"
MAX_NEGATIVES = 10  # Figure 3 varies the number of negatives from 1 to 10


class Decoding(_Strict):
    """The evaluated model's sampling in a DeflectionBench evaluation (seed 003, 4.1: "using top-p =
    1.0, repetition penalty 1.05, and temperature 0.2"). ``override: true`` answers with these values
    whatever the model spec says; ``false`` keeps the model spec's own (the paper queries closed APIs
    "with their default decoding settings"). The table notes say which ran and what a backend
    could not set."""

    temperature: float = Field(default=0.2, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    repetition_penalty: float = Field(default=1.05, gt=0.0, le=2.0)
    override: bool = True


class DeflectionEvalConfig(_Strict):
    """DeflectionBench's evaluation (evaluation/scenarios.py, evaluation/report.py)."""

    # n of Table 4's realistic and adversarial rows (per scenario, per source, CRAG); the other
    # n a run asks for go to the sweep table (Figure 3)
    table_negatives: int = Field(default=TABLE4_NEGATIVES, ge=1, le=MAX_NEGATIVES)
    decoding: Decoding = Field(default_factory=Decoding)


class EvaluationConfig(_Strict):
    deflectionbench: DeflectionEvalConfig = Field(default_factory=DeflectionEvalConfig)
    reflvqa: RefLVQAEvalConfig = Field(default_factory=RefLVQAEvalConfig)
    pope: PopeEvalConfig = Field(default_factory=PopeEvalConfig)


class ReflectVConfig(BenchmarkSection):
    """MIRROR's ReflectV curation (seed paper 002, section 4): see flows/reflectv.py."""

    sources: Sources  # image QA in published layouts, and ready-made FIRE dialogues
    student: str | None = None  # answers the question (sees the image); None: only ingested dialogues
    teacher: str | None = None  # sees the ground truth, replies "Score: N" and "Feedback: ..."
    max_turns: int = Field(default=3, ge=1)  # student answers per dialogue at most
    keywords: LabellerSpec = Heuristic()  # grounding keywords: a model, or the rule-based stand-in
    rewriter: str  # rewrites teacher feedback as first-person reflection
    grounding: GroundingSpec
    segmenter: SegmenterSpec | None = None  # SAM 2 masks from the grounded points
    captions: CaptionSpec = Template()  # inserts caption and marks into a reflection: a model, or 'template'
    # a teacher's feedback that states the answer: the paper forbids revealing it only in the inserted
    # caption (Figure 11), so such a chain is kept (False); True collapses it to a QA pair
    collapse_revealing_feedback: bool = False
    verifier: str  # vision model: do the marks show what the reflection names?
    colors: list[Color] = Field(default_factory=lambda: list(COLORS), min_length=1)
    mark_types: list[MarkType] = Field(default_factory=lambda: list(MARK_TYPES), min_length=1)
    rho: float = Field(default=0.75, ge=0.0, le=1.0)  # share of multi-turn chains in the release
    # how rho is reached (annotation/reflectv/formatting.py): by collapsing surplus chains only (002
    # section 4.5, the paper's), or also by dropping surplus QA pairs when chains are too few
    rho_rule: Literal["collapse", "collapse_or_drop"] = "collapse"
    # the keyword of a dense-perception turn (Scene text, Document, Chart; 002 section 4.3: "we derive
    # precise keywords from ground truth annotations"): from the ground truth (the paper's), or a subject
    # phrase of the question that never states it (Figure 9's prompt alone)
    dense_keywords: Literal["ground_truth", "question"] = "ground_truth"
    # when the caption and marks go in (annotation/reflectv/wording.py): into the teacher's feedback
    # before the first-person rewrite (002 Figures 11 then 12, the paper's), or into the rewrite after it
    caption_order: Literal["before_rewrite", "after_rewrite"] = "before_rewrite"
    seed: int = Field(default=0, ge=0)
    version: str = "1.0.0"
    # set by re-curation (``mmcurate recurate --add-model teacher=M`` / ``verifier=M``), not by
    # a curation run: teachers that score the released dialogues again (the trajectory rules
    # must hold under each) and vision models that check the released marks again (each must
    # say yes to every marked turn); see flows/recurate_reflectv.py
    recheck_teachers: list[str] = Field(default_factory=list)
    recheck_verifiers: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _student_and_teacher(self) -> "ReflectVConfig":
        if (self.student is None) != (self.teacher is None):
            raise ValueError("reflectv needs both student and teacher, or neither (ingested dialogues only)")
        return self

    def roles(self, judge: str | None) -> list[tuple[str, str]]:
        roles = {"student": [self.student], "teacher": [self.teacher], "keywords": model_names(self.keywords),
                 "rewriter": [self.rewriter], "pointing": model_names(self.grounding),
                 "captions": model_names(self.captions), "verifier": [self.verifier],
                 "judge": [judge], "recheck_teacher": self.recheck_teachers,
                 "recheck_verifier": self.recheck_verifiers}
        return [(role, name) for role, names in roles.items() for name in names if name]

    def recuration_roles(self) -> tuple[str, ...]:
        return ("verifier", "teacher")

    def add_recuration_model(self, role: str, name: str) -> None:
        field = "recheck_verifiers" if role == "verifier" else "recheck_teachers"
        if name not in getattr(self, field):
            setattr(self, field, [*getattr(self, field), name])


class DedupConfig(_Strict):
    """Near-duplicates and leakage, checked on every release (``annotation/dedup.py``)."""

    image_distance: int = Field(default=4, ge=0, le=32)  # max Hamming distance of 64-bit perceptual hashes
    question_threshold: float = Field(default=0.8, gt=0.0, le=1.0)  # min Jaccard of char 5-grams of questions
    num_perm: int = Field(default=128, ge=16, le=1024)  # MinHash permutations (LSH candidates)
    earlier_versions: bool = True  # compare with the benchmark's earlier versions under releases_root
    against: list[Path] = Field(default_factory=list)  # other release folders (a training set, another benchmark)
    drop: bool = False  # drop samples whose question and image both nearly repeat another (else only flag)


class CragMMConfig(BenchmarkSection):
    """CRAG-MM, the benchmark CRUISE reports on (seed 001): its public single- and multi-turn
    sets ingested (quarantine with reasons) and published unfiltered as a validated release."""

    sources: Sources  # cragmm: the Hub snapshots of both sets under one root, or several roots
    seed: int = 0
    version: str = "1.0.0"

    def roles(self, judge: str | None) -> list[tuple[str, str]]:
        return []  # the curation asks no model


class CragmmSearch(_Strict):
    """The competition's search package (``cragmm-search-pipeline``, optional extra
    ``mmcurate[cragmm-search]``) as CRUISE's retriever: ``UnifiedSearchPipeline`` arguments."""

    image_model_name: str = Field(min_length=1)  # a CLIP model id or local folder
    image_hf_dataset_id: str = Field(min_length=1)  # the image search index (a Hub dataset id)
    text_model_name: str | None = None  # with web_hf_dataset_id: the web search
    web_hf_dataset_id: str | None = None


class CruiseConfig(_Strict):
    """CRUISE's answering system on CRAG-MM (seed 001, section 3; ``evaluation.cruise``).

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

    @model_validator(mode="after")
    def _consistent(self) -> "CruiseConfig":
        if self.tau_low > self.tau_high:
            raise ValueError(f"cruise.tau_low ({self.tau_low}) must not exceed cruise.tau_high ({self.tau_high})")
        if self.cragmm_search is None:
            if self.search in ("image", "both") and self.image_index is None:
                raise ValueError(f"cruise.search {self.search} needs cruise.image_index (or cruise.cragmm_search)")
            if self.search in ("web", "both") and self.web_index is None:
                raise ValueError(f"cruise.search {self.search} needs cruise.web_index (or cruise.cragmm_search)")
        return self

    def models(self) -> list[str]:
        return [name for name in (self.router, self.summariser) if name]
class PopeConfig(BenchmarkSection):
    """POPE probes (Kestrel's benchmark, seed 000 4.1; see flows/pope.py): published POPE files
    (source ``pope``) or probes built from object annotations (``pope_objects``)."""

    sources: Sources
    seed: int = 0  # which surplus probes go when a split is unbalanced
    version: str = "1.0.0"

    def roles(self, judge: str | None) -> list[tuple[str, str]]:
        return []  # curating probes asks no model


class TaskRunnerConfig(_Strict):
    kind: Literal["threads", "dask", "ray"] = "threads"
    address: str | None = None  # existing cluster; None starts a local one
    workers: int = Field(default=2, ge=1)
    shard_size: int = Field(default=256, ge=1)  # samples per shard of a model stage


def env_name(model: str) -> str:
    """How a model name is written in an environment variable (lower case; see the module docstring)."""
    return re.sub(r"[^0-9a-z]", "_", model.lower())


class _ModelEnv(EnvSettingsSource):
    """``MMCURATE_*`` variables, with model keys matched to the models the config defines
    (a variable's name is lower-cased and may not hold a ``-``)."""

    def __init__(self, settings_cls: type[BaseSettings], known: set[str]) -> None:
        super().__init__(settings_cls)
        self.known = known

    def __call__(self) -> dict[str, Any]:
        data = super().__call__()
        models = data.get("models")
        if isinstance(models, dict):
            data["models"] = {self._model_key(key): value for key, value in models.items()}
        return data

    def _model_key(self, key: str) -> str:
        if key in self.known:
            return key
        matches = sorted(name for name in self.known if env_name(name) == env_name(key))
        if len(matches) > 1:
            raise ConfigError(f"environment variable for model {key!r} is ambiguous: models {matches}")
        return matches[0] if matches else key


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="MMCURATE_", env_nested_delimiter="__", extra="forbid"
    )

    workdir: Path = Path(".mmcurate")  # ingests, caches, indexes
    releases_root: Path = Path("releases")
    cache_url: str | None = None  # default: sqlite at workdir/responses.sqlite
    models: dict[str, ModelSpec] = Field(default_factory=dict)
    judge: JudgeSpec = Field(default_factory=JudgeSpec)
    task_runner: TaskRunnerConfig = Field(default_factory=TaskRunnerConfig)
    deflectionbench: DeflectionBenchConfig | None = None
    reflvqa: RefLVQAConfig | None = None
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    reflectv: ReflectVConfig | None = None
    cragmm: CragMMConfig | None = None
    cruise: CruiseConfig | None = None  # CRUISE's answering system (evaluate --system cruise)
    pope: PopeConfig | None = None
    dedup: DedupConfig = Field(default_factory=DedupConfig)
    # a Prefect notification block (``<type slug>/<name>``, e.g. slack-webhook/curation) told
    # the outcome of unattended runs (``mmcurate watch``, the scheduled watch deployment)
    notify_block: str | None = Field(default=None, pattern=r"^[a-z0-9-]+/[A-Za-z0-9_.-]+$")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        yaml_source = YamlConfigSettingsSource(settings_cls)
        return init_settings, _ModelEnv(settings_cls, _model_keys(init_settings(), yaml_source())), yaml_source

    @model_validator(mode="before")
    @classmethod
    def _name_models(cls, data: Any) -> Any:
        """Models are keyed by name in YAML; the key is the name unless one is given."""
        if isinstance(data, dict) and isinstance(data.get("models"), dict):
            data["models"] = {
                key: ({"name": key, **spec} if isinstance(spec, dict) else spec)
                for key, spec in data["models"].items()
            }
        return data

    @model_validator(mode="after")
    def _references(self) -> "Settings":
        wanted = [self.judge.model] if self.judge.model else []
        wanted += [name for section in self.sections().values() for _, name in section.roles(self.judge.model)]
        graders = self.evaluation.reflvqa.evaluators
        for spec in (graders.groundedness, graders.completeness, graders.relevance):
            wanted += model_names(spec)
        wanted += self.cruise.models() if self.cruise else []
        kestrel = self.evaluation.pope.kestrel
        wanted += model_names(kestrel.grounding) + ([kestrel.verifier] if kestrel.verifier else [])
        captioner = self.evaluation.reflvqa.captioner
        wanted += [captioner] if captioner else []
        missing = sorted(set(wanted) - set(self.models))
        if missing:
            raise ValueError(f"unknown {'model' if len(missing) == 1 else 'models'} {missing}; defined: {sorted(self.models)}")
        if captioner and not self.models[captioner].vision:
            raise ValueError(f"evaluation.reflvqa.captioner: model {captioner!r} does not see images (vision: false); "
                             "name a vision model, or leave it unset for the source captions (a stand-in)")
        return self

    def roles(self, benchmark: str) -> list[tuple[str, str]]:
        """(role, model name) of every model the curation of ``benchmark`` asks, in pipeline order."""
        return self.section(benchmark).roles(self.judge.model)

    def sections(self) -> dict[str, BenchmarkSection]:
        """The benchmark sections this config has, by name."""
        return {name: value for name in type(self).model_fields
                if isinstance(value := getattr(self, name), BenchmarkSection)}

    def add_model(self, spec: str) -> ModelSpec:
        """Resolve ``spec``: a model defined here by name, or a YAML file holding one model
        spec (which is added under its name). Used by ``--model`` / ``--add-model``."""
        if spec in self.models:
            return self.models[spec]
        path = Path(spec)
        if not path.is_file():
            raise ConfigError(f"model {spec!r} is neither defined in the config ({sorted(self.models)}) nor a YAML file")
        try:
            data = yaml.safe_load(path.read_text())
            model = model_from_file_data(data, path.parent)
        except (yaml.YAMLError, TypeError, ValidationError) as exc:
            raise ConfigError(f"model file {path}: {str(exc).splitlines()[0]}") from None
        except RecursionError:
            raise ConfigError(f"model file {path}: nested too deeply to read") from None
        if model.name in self.models and self.models[model.name] != model:
            raise ConfigError(f"model file {path} redefines model {model.name!r}")
        self.models[model.name] = model
        return model

    def section(self, benchmark: str) -> Any:
        """The config section of ``benchmark`` (e.g. ``deflectionbench``), or ConfigError."""
        section = getattr(self, benchmark, None)
        if section is None:
            raise ConfigError(f"the config has no '{benchmark}' section")
        return section

    def sources_of(self, benchmark: str) -> list[tuple[str, SourceSpec]]:
        """(config path, spec) of every source of ``benchmark``, e.g. ``("reflectv.sources[2]", spec)``."""
        return self.section(benchmark).sources_at(benchmark)

    def check_sources(self, benchmark: str) -> None:
        """Refuse, before a curation run starts, a source whose root or image folder is not a
        directory (a re-curation or an evaluation reads no source, so loading does not check)."""
        for where, source in self.sources_of(benchmark):
            for what, folder in (("root", source.root), ("images", source.images)):
                if folder is not None and not folder.is_dir():
                    raise ConfigError(f"{where} ({source.name}): {what} {folder} is not a readable directory")

    def model(self, name: str) -> ModelSpec:
        try:
            return self.models[name]
        except KeyError:
            raise ConfigError(f"unknown model {name!r}; defined: {sorted(self.models)}") from None

    @property
    def response_cache_url(self) -> str:
        return self.cache_url or f"sqlite:///{(self.workdir / 'responses.sqlite').resolve()}"

    @property
    def index_dir(self) -> Path:
        """Where vector indexes and knowledge-base vector stores are kept between runs."""
        return self.workdir / "indexes"

    def resolved(self) -> dict[str, Any]:
        """The fully resolved configuration as plain JSON-able data (for manifests)."""
        return self.model_dump(mode="json")

    @classmethod
    def from_resolved(cls, data: dict[str, Any], base: Path) -> "Settings":
        """Settings from ``resolved()`` data as a manifest records it (paths relative to the
        release folder ``base``), with environment overrides as ``load_config`` applies them."""
        try:
            settings = cls(**data)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ConfigError(f"recorded config: {field_path(first['loc'])}: {first['msg']}") from None
        from_env = _leaves(_ModelEnv(cls, _model_keys(data))())
        return _read_prompts(_resolve_paths(settings, base.resolve(), from_env))


def field_path(loc: tuple[Any, ...]) -> str:
    """A pydantic error location as the config spells it: ``deflectionbench.sources[0].limit``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def model_from_file_data(data: Any, folder: Path) -> ModelSpec:
    """A model spec as a file holds it (a YAML model file, a catalog entry): relative paths
    (a scripted model's ``script``, a ``tokenizer``) resolve against the file's ``folder``."""
    return _resolve_paths(ModelSpec(**data), folder.resolve())


def _model_keys(*sources: dict[str, Any]) -> set[str]:
    return {key for data in sources if isinstance(data.get("models"), dict) for key in data["models"]}


Location = tuple[Any, ...]


def _leaves(data: Any, at: Location = ()) -> set[Location]:
    """The locations of the values a nested dict sets (a list is one value)."""
    if isinstance(data, dict):
        return {leaf for key, value in data.items() for leaf in _leaves(value, (*at, key))}
    return {at}


def _resolve_paths(obj: Any, base: Path, from_env: set[Location] = frozenset(), at: Location = ()) -> Any:
    """Make relative paths absolute: against the current directory where the environment set
    them (``from_env``: locations of values from ``MMCURATE_*``), else against ``base``."""
    if isinstance(obj, BaseModel):
        for name in type(obj).model_fields:
            value = getattr(obj, name)
            new = _resolve_paths(value, base, from_env, (*at, name))
            if new is not value:
                object.__setattr__(obj, name, new)
        return obj
    if isinstance(obj, Path):
        obj = obj.expanduser()
        if obj.is_absolute():
            return obj
        env = any(at[:n] in from_env for n in range(1, len(at) + 1))
        return ((Path.cwd() if env else base) / obj).resolve()
    if isinstance(obj, list):
        return [_resolve_paths(v, base, from_env, (*at, i)) for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        return {k: _resolve_paths(v, base, from_env, (*at, k)) for k, v in obj.items()}
    return obj


def bundled_config(name: str) -> Path:
    """A configuration shipped with mmcurate (``demo.yaml``, ``dryrun.yaml``, ...): the file in
    ``configs/`` of a checkout, or the package data ``mmcurate.configs`` of an install. Its
    relative paths resolve against its own folder, as for any config (the demo's point at
    the fixtures of a checkout, ``tests/fixtures/generated``)."""
    folder = Path(str(files("mmcurate.configs")))
    path = folder / name
    if not path.is_file():
        shipped = sorted(p.name for p in folder.glob("*.yaml"))
        raise ConfigError(f"no bundled config {name!r}; bundled: {', '.join(shipped)}")
    return path


def _read_prompts(settings: Settings) -> Settings:
    """Read the prompt-template file a DeflectionBench section names (after its path is resolved)."""
    section = settings.deflectionbench
    if section is not None and section.prompts is not None:
        section.prompts = section.prompts.read()
    return settings


def read_yaml(path: Path, what: str) -> Any:
    """The YAML document in ``path``; ConfigError (one line, naming ``what``) when it is not
    valid YAML or nested too deeply to read."""
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what} {path} is not valid YAML: {exc}".replace("\n", " ")) from None
    except RecursionError:
        raise ConfigError(f"{what} {path} is nested too deeply to read") from None


def load_config(path: Path | str, **overrides: Any) -> Settings:
    """Load ``path`` (YAML) with environment overrides; raise ConfigError with one clear line."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    data = read_yaml(path, "config")

    class _FromFile(Settings):
        model_config = SettingsConfigDict(yaml_file=path)

    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"config {path}: expected a mapping of settings at the top level, got a "
                          f"{type(data).__name__}")
    try:
        settings = _FromFile(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"config {path}: {field_path(first['loc'])}: {first['msg']} "
                          f"({counted(exc.error_count(), 'error')})") from None
    resolved = Settings.model_construct(**{k: getattr(settings, k) for k in Settings.model_fields})
    known = _model_keys(overrides, data if isinstance(data, dict) else {})
    from_env = _leaves(_ModelEnv(_FromFile, known)()) - _leaves(overrides)
    try:
        return _read_prompts(_resolve_paths(resolved, path.parent.resolve(), from_env))
    except ConfigError as exc:
        raise ConfigError(f"config {path}: deflectionbench.prompts: {exc}") from None
